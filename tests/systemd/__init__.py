"""Under systemd: sd_notify, the journal, credentials, `mysqlq install-systemd` end to end, and the
demo."""
