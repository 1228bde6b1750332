#!/usr/bin/env bash
# The steps the GitHub workflows (throughput-gate.yml, bless-baseline.yml) run around the
# inference server, in one script so that tests/it/gate_server_script.rs can run them directly.
#
#   gate-server.sh split-args STRING
#       Splits a workflow input into arguments and prints each followed by a NUL byte, for
#       `mapfile -d '' -t extra < <(gate-server.sh split-args "$EXTRA_ARGS")`. Never evaluates:
#       the rule is
#         - blanks (space, tab, newline) separate words;
#         - '...' groups everything inside as it is;
#         - "..." groups everything inside; \" and \\ inside stand for " and \;
#         - \ outside quotes takes the next character as it is;
#         - $ ` ( ) ; | & < > * ? ~ are ordinary characters: nothing is expanded or run.
#       An unterminated quote or a trailing \ is an error (exit 2).
#
#   gate-server.sh start LOG ENDPOINTS COMMAND
#       Refuses (exit 2) when a port of ENDPOINTS (comma-separated URLs) on this machine is
#       already taken (a leftover server of a killed job), naming the process where ss or
#       lsof can. Else starts COMMAND (a shell command, the workflow's server-command input)
#       in its own process group, output to LOG, and prints its process id.
#
#   gate-server.sh wait PID LOG TIMEOUT_SECONDS URL...
#       Polls each URL (GET URL/health, else URL/v1/models; a URL with a path is polled as
#       given) until it answers 2xx. Fails (exit 2) with the end of LOG as soon as process PID
#       has exited (a server that dies while loading), or when TIMEOUT_SECONDS have passed.
#       PID may be empty (a server the runner keeps running).
#
#   gate-server.sh stop PID
#       Stops the process group PID leads: SIGTERM, up to 30 s, then SIGKILL.
#
#   gate-server.sh comment FILE
#       Posts FILE as the pull request's sticky comment, or updates the one posted before
#       (found by its first line, the marker `<!-- throughline-verdict -->`, among the
#       comments of COMMENT_AUTHOR, default `github-actions[bot]`: a comment anyone else
#       wrote with the marker is never edited), with `gh api`. FILE must name, on its second
#       line, the run THROUGHLINE_RUN_ID says (the gate step's `run_id` output): a
#       pr-comment.md that the check did not write (a pull request can commit one) is
#       refused. Needs GH_TOKEN, GITHUB_REPOSITORY, PR_NUMBER and THROUGHLINE_RUN_ID, and the
#       GitHub CLI: installed on GitHub's hosted runners (the comment jobs run on
#       ubuntu-latest), refused with that advice where it is missing.
set -euo pipefail

MARKER='<!-- throughline-verdict -->'
LOG_TAIL_LINES="${THROUGHLINE_LOG_TAIL_LINES:-50}"
POLL_SECONDS="${THROUGHLINE_POLL_SECONDS:-2}"

fail() {
    echo "::error title=$1::$2"
    exit 2
}

split_args() {
    local s="$1" word="" in_word=0 i=0 n=${#1} c
    while ((i < n)); do
        c="${s:i:1}"
        case "$c" in
            ' ' | $'\t' | $'\n')
                if ((in_word)); then printf '%s\0' "$word"; fi
                word="" in_word=0
                ;;
            "'")
                in_word=1
                local rest="${s:i+1}"
                if [[ "$rest" != *"'"* ]]; then
                    echo "gate-server.sh: unterminated ' in the arguments: $s" >&2
                    return 2
                fi
                local inside="${rest%%\'*}"
                word+="$inside"
                i=$((i + 1 + ${#inside}))
                ;;
            '"')
                in_word=1
                i=$((i + 1))
                local closed=0
                while ((i < n)); do
                    c="${s:i:1}"
                    if [[ "$c" == '"' ]]; then
                        closed=1
                        break
                    elif [[ "$c" == '\' && $((i + 1)) -lt n && ( "${s:i+1:1}" == '"' || "${s:i+1:1}" == '\' ) ]]; then
                        word+="${s:i+1:1}"
                        i=$((i + 1))
                    else
                        word+="$c"
                    fi
                    i=$((i + 1))
                done
                if ((!closed)); then
                    echo "gate-server.sh: unterminated \" in the arguments: $s" >&2
                    return 2
                fi
                ;;
            '\')
                if ((i + 1 >= n)); then
                    echo "gate-server.sh: the arguments end in a \\: $s" >&2
                    return 2
                fi
                in_word=1
                word+="${s:i+1:1}"
                i=$((i + 1))
                ;;
            *)
                in_word=1
                word+="$c"
                ;;
        esac
        i=$((i + 1))
    done
    if ((in_word)); then printf '%s\0' "$word"; fi
}

# The port of a URL on this machine (127.0.0.1, localhost, [::1], 0.0.0.0), or nothing.
local_port() {
    local url="$1" hostport host port
    hostport="${url#*://}"
    hostport="${hostport%%/*}"
    case "$hostport" in
        \[*\]:*) host="${hostport%]:*}]" port="${hostport##*]:}" ;;
        *:*) host="${hostport%:*}" port="${hostport##*:}" ;;
        *) host="$hostport" port="" ;;
    esac
    if [[ -z "$port" ]]; then
        case "$url" in https://*) port=443 ;; *) port=80 ;; esac
    fi
    case "$host" in
        127.* | localhost | '[::1]' | 0.0.0.0) echo "$port" ;;
    esac
}

# Who listens on a TCP port, as well as ss or lsof can say.
listener() {
    local port="$1" who=""
    if command -v ss >/dev/null 2>&1; then
        who="$(ss -Hltnp "sport = :$port" 2>/dev/null | sed -n 's/.*users:((\(.*\)))/\1/p' | head -n 1)"
    fi
    if [[ -z "$who" ]] && command -v lsof >/dev/null 2>&1; then
        who="$(lsof -nP -iTCP:"$port" -sTCP:LISTEN 2>/dev/null | awk 'NR==2 {print $1 " pid " $2}')"
    fi
    echo "${who:-a process this user cannot see}"
}

port_taken() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
    local log="$1" endpoints="$2" command="$3" url port
    local -a urls=()
    if [[ -n "$endpoints" ]]; then IFS=',' read -r -a urls <<<"$endpoints"; fi
    for url in "${urls[@]}"; do
        url="${url//[[:space:]]/}"
        port="$(local_port "$url")"
        if [[ -n "$port" ]] && port_taken "$port"; then
            fail "Port taken" "port $port ($url) is already in use by $(listener "$port"), before the server was started: a server left over from a killed job? Stop it, or use another port"
        fi
    done
    mkdir -p "$(dirname "$log")"
    # Its own process group, so that stopping it stops everything it started.
    setsid bash -c "$command" >"$log" 2>&1 </dev/null &
    echo "$!"
}

tail_log() {
    local log="$1"
    if [[ -f "$log" ]]; then
        echo "--- the last $LOG_TAIL_LINES lines of $log:"
        tail -n "$LOG_TAIL_LINES" "$log" || true
        echo "---"
    fi
}

# Whether process PID still runs (a zombie, an exited child nobody reaped, does not).
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    local state
    state="$(sed -n 's/^.*) \([A-Za-z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null || true)"
    [[ "$state" != Z ]]
}

healthy() {
    local url="${1%/}"
    if [[ "$url" == *://*/* ]]; then
        curl -fs -o /dev/null --max-time 10 "$url"
    else
        curl -fs -o /dev/null --max-time 10 "$url/health" ||
            curl -fs -o /dev/null --max-time 10 "$url/v1/models"
    fi
}

wait_healthy() {
    local pid="$1" log="$2" timeout="$3" url
    shift 3
    case "$timeout" in '' | *[!0-9]*) fail "Bad timeout" "the health timeout must be a whole number of seconds, got '$timeout'" ;; esac
    local deadline=$((SECONDS + timeout))
    for url in "$@"; do
        until healthy "$url"; do
            if [[ -n "$pid" ]] && ! alive "$pid"; then
                echo "::error title=Server exited::the server process $pid exited before $url was healthy"
                tail_log "$log"
                exit 2
            fi
            if ((SECONDS >= deadline)); then
                echo "::error title=Server not healthy::$url was not healthy within ${timeout}s"
                tail_log "$log"
                exit 2
            fi
            sleep "$POLL_SECONDS"
        done
        echo "$url is healthy"
    done
}

stop() {
    local pid="$1"
    [[ -n "$pid" ]] || return 0
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do
        alive "$pid" || break
        sleep 1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    echo "server $pid stopped"
}

comment() {
    local file="$1" id run author
    [[ -f "$file" ]] || fail "No comment" "$file does not exist"
    if [[ "$(head -n 1 "$file")" != "$MARKER" ]]; then
        fail "Bad comment" "$file does not start with the line $MARKER"
    fi
    run="${THROUGHLINE_RUN_ID:-}"
    case "$run" in
        '' | *[!0-9a-f]*) fail "No run id" "THROUGHLINE_RUN_ID must be the gate step's run_id output (16 hex digits); without it no comment is posted" ;;
    esac
    if [[ "$(sed -n 2p "$file")" != "<!-- throughline-run: $run -->" ]]; then
        fail "Not this run's comment" "$file does not name run $run on its second line: it was not written by the check that ran (a committed file?); no comment is posted"
    fi
    author="${COMMENT_AUTHOR:-github-actions[bot]}"
    case "$author" in
        *[!A-Za-z0-9_.\[\]-]*) fail "Bad author" "COMMENT_AUTHOR must be a GitHub login, got '$author'" ;;
    esac
    : "${GITHUB_REPOSITORY:?}" "${PR_NUMBER:?}"
    command -v gh >/dev/null 2>&1 ||
        fail "No GitHub CLI" "the comment is posted with the GitHub CLI (gh), which this runner lacks: run the comment job on GitHub's ubuntu-latest, where it is installed"
    case "$PR_NUMBER" in '' | *[!0-9]*) fail "Bad pull request" "PR_NUMBER must be a number, got '$PR_NUMBER'" ;; esac
    id="$(gh api --paginate "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" \
        --jq ".[] | select(.user.login == \"$author\" and (.body | startswith(\"$MARKER\"))) | .id" | head -n 1)"
    if [[ -n "$id" ]]; then
        gh api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F "body=@$file" >/dev/null
        echo "updated comment $id"
    else
        gh api --method POST "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" -F "body=@$file" >/dev/null
        echo "posted a new comment"
    fi
}

cmd="${1:-}"
shift || true
case "$cmd" in
    split-args) split_args "${1-}" ;;
    start) start "$1" "$2" "$3" ;;
    wait) wait_healthy "$@" ;;
    stop) stop "${1-}" ;;
    comment) comment "$1" ;;
    *)
        echo "usage: gate-server.sh split-args|start|wait|stop|comment ... (see the comment at its top)" >&2
        exit 2
        ;;
esac
