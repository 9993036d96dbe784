"""A plain script: enqueue one job and a batch, print their ids.

    MYSQLQ_DSN=mysql://app:secret@127.0.0.1:3306/shop python enqueue_script.py
"""

from __future__ import annotations

import mysqlq


def main() -> None:
    with mysqlq.Producer() as producer:  # the database from MYSQLQ_DSN
        report = producer.enqueue("report.build", {"day": "2026-11-24"}, queue="reports")
        count = producer.enqueue_many([mysqlq.Job("image.resize", {"id": n}) for n in range(3)])
    print(f"report job {report}; {count} resize jobs")


if __name__ == "__main__":
    main()
