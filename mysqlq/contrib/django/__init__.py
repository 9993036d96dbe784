"""mysqlq as a Django Tasks backend (``django.tasks`` in Django 6, the ``django-tasks`` backport
before): ``TASKS = {"default": {"BACKEND": "mysqlq.contrib.django.MysqlqBackend"}}``. Workers run the
tasks with ``mysqlq worker`` and ``DJANGO_SETTINGS_MODULE`` set (see the Django guide)."""

from __future__ import annotations

from mysqlq.contrib.django.backend import MysqlqBackend
from mysqlq.contrib.django.fairness import fairness_key

__all__ = ["MysqlqBackend", "fairness_key"]
