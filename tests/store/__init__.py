"""The store (mysqlq.store): connections, the schema and its migrations, upgrades, TLS and least
privileges."""
