"""A FastAPI app that enqueues inside its SQLAlchemy transaction, on the same mysqlclient connection:
the order row and its confirmation job commit together, or neither exists.

    MYSQLQ_DSN=mysql://app:secret@127.0.0.1:3306/shop uvicorn fastapi_app:app

(see docs/enqueueing.md, "Inside your own transaction from other frameworks").
"""

from __future__ import annotations

from fastapi import FastAPI, HTTPException
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL

import mysqlq

settings = mysqlq.Settings()  # the database from MYSQLQ_DSN
dsn = settings.dsn
engine = create_engine(URL.create(
    "mysql+mysqldb", username=dsn.user, password=dsn.password or None, host=dsn.host, port=dsn.port,
    database=dsn.database, query={"unix_socket": dsn.unix_socket} if dsn.unix_socket else {}))
app = FastAPI()


@app.post("/orders/{order_id}")
def place_order(order_id: int, total: int, fail_after_insert: bool = False) -> dict[str, int]:
    with engine.begin() as conn:  # one transaction: COMMIT at the end, ROLLBACK on an exception
        conn.execute(text("INSERT INTO orders (id, total) VALUES (:id, :total)"), {"id": order_id, "total": total})
        raw = conn.connection.dbapi_connection  # the mysqlclient connection under this transaction
        job_id = mysqlq.enqueue_on(raw, mysqlq.Job("order.confirm", {"order": order_id}), settings)
        if fail_after_insert:
            raise HTTPException(status_code=500, detail="failed after the insert: nothing is kept")
    mysqlq.notify(settings, ["default"])  # after the commit: wake idle workers now
    return {"order": order_id, "job": job_id}
