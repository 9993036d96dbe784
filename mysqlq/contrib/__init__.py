"""Integrations with frameworks (one subpackage each). They use mysqlq's public API and its parts;
no part of mysqlq imports them."""
