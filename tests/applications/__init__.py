"""mysqlq inside an application: the Django backend, the recipes, mysqlq.testing, the library's
silence, and the examples of the README and the guides."""
