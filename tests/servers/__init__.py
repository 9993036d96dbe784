"""The servers under mysqlq: the harness's private server, multi-host DSNs and failover, Galera and
Group Replication."""
