"""The dashboard (mysqlq.web): its pages over HTTP and in a real browser."""
