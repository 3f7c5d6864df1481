#!/bin/sh
# The backup schedule of deploy/compose.yaml (docs/operations.md, "Backups"), in UTC: a
# full backup on Sundays at 01:00, a differential on the other days at 01:00, and an
# incremental at each of the other hours; the server itself archives its WAL as it goes.
# pgBackRest expires what its retention no longer needs after each backup. One backup at
# a time, in the foreground; a failed one is logged, and the next hour's is taken anyway.
set -u
stanza=ddz
until pgbackrest --stanza="$stanza" --log-level-console=warn stanza-create; do sleep 10; done
pgbackrest --stanza="$stanza" check || true
# A full backup at once on a repository that has none.
pgbackrest --stanza="$stanza" info --output=json | grep -q '"type":"full"' \
    || pgbackrest --stanza="$stanza" --type=full backup
while true; do
    now=$(date -u +%s)
    sleep $((3600 - now % 3600))
    hour=$(date -u +%H)
    if [ "$hour" = "01" ] && [ "$(date -u +%u)" = "7" ]; then
        kind=full
    elif [ "$hour" = "01" ]; then
        kind=diff
    else
        kind=incr
    fi
    pgbackrest --stanza="$stanza" --type="$kind" backup || echo "ddz backup: the $kind backup failed" >&2
done
