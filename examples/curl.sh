#!/usr/bin/env bash
# A whole session over plain HTTP: the agent, a session, a client with one tool, input that makes the
# scripted model call it, the call read from the session's events, acked and answered, and the run's
# final message.
#
#   SWITCHBOARD_API_KEY=$(cat .switchboard/dev-api-key) bash examples/curl.sh
#
# SWITCHBOARD_URL is the API (http://127.0.0.1:8000 by default), SWITCHBOARD_API_KEY the key
# `switchboard up` printed. Any step that fails stops the script with its answer and a non-zero exit.
# JSON is read with python3, which every machine running Switchboard has (jq is not everywhere).
set -euo pipefail

URL=${SWITCHBOARD_URL:-http://127.0.0.1:8000}
URL=${URL%/}
KEY=${SWITCHBOARD_API_KEY:?is not set: give it the key that switchboard up printed}
AGENT=scripted  # the agent `switchboard session new` makes; made here too if there is none
command -v python3 >/dev/null || { echo "curl.sh: python3 reads the JSON answers; install it" >&2; exit 1; }

# curl's own error line is kept here, and told as part of the script's one line about the failure.
curl_said=$(mktemp)
trap 'rm -f "$curl_said"' EXIT

# api METHOD PATH CREDENTIAL [BODY]: the answer's body; or one line on stderr, curl's reason (the status,
# or no server on that port) and the server's answer, and exit 1.
api() {
    local args=(--silent --show-error --fail-with-body -X "$1" -H "Authorization: Bearer $3")
    if [ $# -gt 3 ]; then
        args+=(-H "Content-Type: application/json" --data "$4")
    fi
    local answer
    if ! answer=$(curl "${args[@]}" "$URL$2" 2>"$curl_said"); then
        local reason
        reason=$(sed -n '1s/^curl: ([0-9]*) //p' "$curl_said")
        echo "curl.sh: $1 $2 failed${reason:+ ($reason)}${answer:+: $answer}" >&2
        exit 1
    fi
    printf '%s' "$answer"
}

# json EXPRESSION: EXPRESSION evaluated over stdin's JSON (as `d`), printed as text.
json() {
    python3 -c 'import json, sys
d = json.load(sys.stdin)
value = eval(sys.argv[1], {"d": d})
print(value if isinstance(value, str) else json.dumps(value))' "$1"
}

# 1. The agent called $AGENT, found by name (every page of the listing), else made with the scripted model.
agent_id="" after=""
while :; do
    page=$(api GET "/v1/agents?limit=200${after:+&after=$after}" "$KEY")
    agent_id=$(json "next((a['id'] for a in d['items'] if a['name'] == '$AGENT'), '')" <<<"$page")
    after=$(json "d['next_cursor'] or ''" <<<"$page")
    if [ -n "$agent_id" ] || [ -z "$after" ]; then break; fi
done
if [ -z "$agent_id" ]; then
    providers=$(api GET "/v1/model-providers" "$KEY")
    provider_id=$(json "next(p['id'] for p in d['items'] if p['display_name'] == 'Scripted')" <<<"$providers")
    agent_id=$(api POST "/v1/agents" "$KEY" "{\"name\": \"$AGENT\"}" | json "d['id']")
    model='{"format": "openai_responses", "model": "scripted", "max_tokens": 1000, "context_window": 8000}'
    api POST "/v1/agents/$agent_id/versions" "$KEY" "{\"model_provider_id\": \"$provider_id\", \"model\": $model}" >/dev/null
    echo "agent: $agent_id (made)"
else
    echo "agent: $agent_id"
fi

# 2. A session. Its token is all a frontend or a tool server holds; everything below uses it.
session=$(api POST "/v1/sessions" "$KEY" "{\"agent_id\": \"$agent_id\"}")
sid=$(json "d['id']" <<<"$session")
token=$(json "d['session_token']" <<<"$session")
echo "session: $sid"

# 3. A client with one tool. The name it is given (a suffix is added when one is taken) is the one the
#    model sees: client__<name>__<tool>.
tool='{"name": "order_status", "description": "The status of an order, by its id",
       "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}'
lifetime='{"type": "ttl", "data": {"seconds": 60}}'
client=$(api POST "/v1/sessions/$sid/clients" "$token" "{\"name\": \"curl\", \"lifetime\": $lifetime, \"tools\": [$tool]}")
cid=$(json "d['id']" <<<"$client")
name=$(json "d['name']" <<<"$client")
echo "client: $name ($cid)"

# 4. Input. The scripted model turns `/call <tool> <JSON arguments>` into a call of that tool.
input="{\"type\": \"input\", \"text\": \"/call client__${name}__order_status {\\\"order_id\\\": \\\"A-1001\\\"}\"}"
run_id=$(api POST "/v1/sessions/$sid/events" "$token" "$input" | json "d['run_id']")
echo "run: $run_id"

# 5. The call, as the session's events show it to this client (a long-lived client reads
#    /events/stream instead, and sees it the moment it is dispatched).
call_id=""
for _ in $(seq 100); do
    events=$(api GET "/v1/sessions/$sid/events?order=asc&limit=200" "$token")
    dispatched="[e for e in d['items'] if e['type'] == 'client_tool_dispatched' and e['client_id'] == '$cid']"
    call_id=$(json "next((e['call_id'] for e in $dispatched), '')" <<<"$events")
    if [ -n "$call_id" ]; then break; fi
    sleep 0.1
done
[ -n "$call_id" ] || { echo "curl.sh: no call reached client $name within 10 s" >&2; exit 1; }
order_id=$(json "next(e['arguments']['order_id'] for e in $dispatched)" <<<"$events")
echo "call: $call_id order_status(order_id=$order_id)"

# 6. Ack at once (the call is then this client's: 300 s to answer instead of 60 s to ack), then answer.
api POST "/v1/sessions/$sid/clients/$cid/calls/$call_id/ack" "$token" >/dev/null
api POST "/v1/sessions/$sid/clients/$cid/calls/$call_id/result" "$token" \
    "{\"text\": \"Order $order_id has shipped.\"}" >/dev/null

# 7. The run's end, and its final message: the model's answer, built from the result.
ended=""
for _ in $(seq 100); do
    events=$(api GET "/v1/sessions/$sid/events?order=asc&limit=200" "$token")
    ended=$(json "next((e['type'] for e in d['items'] if e.get('run_id') == '$run_id'
                  and e['type'] in ('run_completed', 'run_failed', 'run_cancelled')), '')" <<<"$events")
    if [ -n "$ended" ]; then break; fi
    sleep 0.1
done
[ "$ended" = run_completed ] || { echo "curl.sh: the run ended with '${ended:-nothing within 10 s}'" >&2; exit 1; }
answer=$(json "[''.join(b['data']['text'] for b in e['message']['content'] if b['type'] == 'text')
               for e in d['items'] if e['type'] == 'message_assistant'][-1]" <<<"$events")
echo "answer: $answer"

# 8. Leave: the name is free again, and any call still owed would fail at once with client_gone.
api DELETE "/v1/sessions/$sid/clients/$cid" "$token" >/dev/null
