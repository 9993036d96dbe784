"""A small Django project for mysqlq's Django Tasks backend tests."""
