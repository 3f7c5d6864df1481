#!/bin/sh
# Patroni's post_bootstrap: the service's role and database, once, on the first primary
# (its connection string, as the superuser, is the first argument).
set -eu
psql "$1" -v ON_ERROR_STOP=1 -v password="$DDZ_DB_PASSWORD" <<'SQL'
CREATE ROLE ddz LOGIN PASSWORD :'password';
CREATE DATABASE ddz OWNER ddz;
SQL
