"""Settings of the test project: the queue lives in the default database (MySQL/MariaDB, named by
SHOP_DSN, a mysqlq DSN); "other" is an SQLite database whose backend enqueues on commit."""

from __future__ import annotations

import os

from mysqlq import Dsn
from mysqlq.contrib.django.compat import SOURCE

_dsn = Dsn.parse(os.environ.get("SHOP_DSN", "mysql://root@127.0.0.1:3306/test"))

SECRET_KEY = "tests-only"
USE_TZ = True
INSTALLED_APPS = ["shop", "mysqlq.contrib.django", *(["django_tasks"] if SOURCE == "django_tasks" else [])]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": _dsn.database,
        "USER": _dsn.user,
        "PASSWORD": _dsn.password,
        "HOST": _dsn.host,
        "PORT": str(_dsn.port),
        "OPTIONS": {"unix_socket": _dsn.unix_socket} if _dsn.unix_socket else {},
        "CONN_MAX_AGE": 600,
    },
    "other": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ.get("SHOP_SQLITE", ":memory:")},
}
TASKS = {
    "default": {
        "BACKEND": "mysqlq.contrib.django.MysqlqBackend",
        "QUEUES": ["default", "mail"],
        "OPTIONS": {"MAX_ATTEMPTS": 3},
    },
    "on_commit": {
        "BACKEND": "mysqlq.contrib.django.MysqlqBackend",
        "QUEUES": ["default"],
        "OPTIONS": {"DATABASE": "other", "DSN": os.environ.get("SHOP_DSN", "mysql://root@127.0.0.1:3306/test")},
    },
}
