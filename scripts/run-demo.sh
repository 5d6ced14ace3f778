#!/usr/bin/env bash
# `make run`: serve payd on 127.0.0.1:8080 with ./payd.db. On a new database it first creates
# a `demo` user with a USD account and prints the API key (shown only once) and ready curl lines.
set -euo pipefail
payd=${1:-build/payd}
db=${PAYD_DB:-./payd.db}
listen=${PAYD_LISTEN:-127.0.0.1:8080}
if [ ! -s "$db" ]; then
  user=$("$payd" user create demo --db "$db")
  key=$(printf '%s' "$user" | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')
  uid=$(printf '%s' "$user" | sed -n 's/.*"user_id":"\([^"]*\)".*/\1/p')
  acct=$("$payd" account create --user "$uid" --currency USD --name demo --db "$db" |
         sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
  cat <<MSG

payd demo user created. Its API key is shown only now:

  export PAYD_API_KEY=$key

Create a payment (run it twice: the second answer is the stored one, Idempotent-Replayed: true):

  curl -i -X POST http://$listen/v1/payments -H "Authorization: Bearer \$PAYD_API_KEY" \\
    -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-1' \\
    -d '{"account_id": "$acct", "amount": 4200, "currency": "USD", "source": "tok_visa"}'

List the account's payments:

  curl -s http://$listen/v1/accounts/$acct/payments -H "Authorization: Bearer \$PAYD_API_KEY"

Or open the dashboard at http://$listen/ and sign in with the key.

MSG
else
  echo "Using the existing $db (delete it for a fresh demo user and key)."
fi
echo "Serving on http://$listen  (Ctrl-C stops)"
exec "$payd" serve --listen "$listen" --db "$db"
