"""A Flask app whose threads share one Producer (its pool lends each thread a connection of its own).

    MYSQLQ_DSN=mysql://app:secret@127.0.0.1:3306/shop waitress-serve --threads 8 flask_app:app

(see docs/enqueueing.md, "From many threads").
"""

from __future__ import annotations

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue

import mysqlq

producer = mysqlq.Producer(pool_size=8)  # one per process, made once, shared by every request thread
app = Flask(__name__)


@app.post("/signup")
def signup() -> ResponseReturnValue:
    address = request.form["email"]
    job_id = producer.enqueue("mail.welcome", {"to": address}, dedupe_key=f"welcome:{address}")
    return jsonify(job=job_id), 202
