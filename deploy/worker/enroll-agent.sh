#!/usr/bin/env bash
# Enrolls this host as an AdventureTime pull agent, run by systemd: for hosts the controller cannot
# reach (behind NAT, a campus firewall), which claim their work from it over HTTP (docs/deploy.md,
# "Pull agents"). One command, as root:
#
#   sudo bash enroll-agent.sh --controller https://adv.lab.example --token-file ./enroll-token \
#     [--name NAME] [--user USER] [--state-dir DIR] [--label k=v]... [--pool P]... [--adv PATH] \
#     [--dry-run] [-- MORE adv agent FLAGS]
#
# It checks adv (with an `agent` command), Node.js >= 20 and the service user, then writes
#   /etc/adventuretime/agent-enroll-token             the Backend's enrollment token (0600, the user's)
#   /etc/adventuretime/agent.env                      ADV_CONTROLLER_URL and PATH (0600 root)
#   /etc/systemd/system/adventuretime-agent.service   the unit (deploy/worker/adventuretime-agent.service)
# and runs systemctl daemon-reload && systemctl enable --now adventuretime-agent. It never creates a
# user and never downloads anything. --dry-run prints every file and command instead, and works as
# any user without systemd. Running it again rewrites the three files (restarting the agent only
# when one changed). Exit 0: enrolled (or dry run done); 1: a precondition failed; 2: bad usage.
set -euo pipefail

UNIT_NAME=adventuretime-agent
ETC_DIR=/etc/adventuretime
TOKEN_DEST=$ETC_DIR/agent-enroll-token
ENV_DEST=$ETC_DIR/agent.env
UNIT_DEST=/etc/systemd/system/$UNIT_NAME.service
STD_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

usage() {
  printf '%s\n' \
    'Usage: sudo bash enroll-agent.sh --controller URL --token-file FILE [options] [-- ADV_AGENT_FLAGS...]' \
    '' \
    'Enrolls this host as an AdventureTime pull agent running as the systemd service adventuretime-agent.' \
    '  --controller URL   the controller'"'"'s --http address, or the TLS proxy in front of it (http:// or https://)' \
    '  --token-file FILE  holds the enrollment token: the value of the agent Backend'"'"'s tokenSecret' \
    '  --name NAME        this agent'"'"'s name, a DNS label (default: the host name)' \
    '  --user USER        the existing account the agent and its jobs run as' \
    '                     (default: the user who ran sudo; this script never creates users)' \
    '  --state-dir DIR    the agent'"'"'s token and job dirs (default: ~USER/.adventuretime/agent)' \
    '  --label k=v        a label of this host for Backends'"'"' selectors (repeat)' \
    '  --pool P           only this pool (repeat; default: every pool the token opens)' \
    '  --adv PATH         the adv executable (default: command -v adv)' \
    '  --dry-run          print every file it would write and every command it would run; change nothing' \
    '  -- FLAGS...        more adv agent flags, e.g. -- --slots 2 --accept-run '"'"'llm-*'"'"' --log-level debug' \
    'Values go into a systemd unit: spaces, quotes, $, %, ; and backslashes are refused.' \
    'Exit 0: enrolled (or dry run done); 1: a precondition failed; 2: bad usage.'
}

bad_usage() {
  echo "enroll-agent.sh: $*" >&2
  echo "(try --help)" >&2
  exit 2
}
failed() {
  echo "enroll-agent.sh: $*" >&2
  exit 1
}

controller=""
token_file=""
name=""
user=""
state_dir=""
adv=""
dry=0
labels=()
pools=()
extra=()

need_value() {
  [ "$2" -ge 2 ] || bad_usage "$1 needs a value"
}
while [ $# -gt 0 ]; do
  case "$1" in
    --controller | --token-file | --name | --user | --state-dir | --label | --pool | --adv)
      need_value "$1" $#
      opt=$1
      val=$2
      shift 2
      ;;
    --controller=* | --token-file=* | --name=* | --user=* | --state-dir=* | --label=* | --pool=* | --adv=*)
      opt=${1%%=*}
      val=${1#*=}
      shift
      ;;
    --dry-run)
      dry=1
      shift
      continue
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    --)
      shift
      extra=("$@")
      break
      ;;
    *)
      bad_usage "unknown argument: $1"
      ;;
  esac
  case "$opt" in
    --controller) controller=$val ;;
    --token-file) token_file=$val ;;
    --name) name=$val ;;
    --user) user=$val ;;
    --state-dir) state_dir=$val ;;
    --label) labels+=("$val") ;;
    --pool) pools+=("$val") ;;
    --adv) adv=$val ;;
  esac
done

# --- arguments (exit 2) ---------------------------------------------------------------------------

# Everything below ends up in the unit's ExecStart, which no shell reads: systemd splits it at spaces
# and expands $VAR, ${VAR} and %-specifiers itself, and treats quotes and backslashes specially.
unit_safe() {
  case "$2" in
    *[[:space:]]* | *[[:cntrl:]]* | *[\'\"\\\$%\;]*)
      bad_usage "$1 $(printf '%q' "$2"): spaces, quotes, \$, %, ; and backslashes cannot go safely into a systemd unit; choose a value without them"
      ;;
  esac
}
dns_label='^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'
# As adv agent checks --label (cli/commands/agent.ts).
label_re='^[A-Za-z0-9._/-]{1,253}=[A-Za-z0-9._-]{0,63}$'

[ -n "$controller" ] || bad_usage "--controller URL is required (the controller's --http address, or the TLS proxy in front of it)"
[ -n "$token_file" ] || bad_usage "--token-file FILE is required (it holds the value of the agent Backend's tokenSecret)"
unit_safe --controller "$controller"
[[ "$controller" =~ ^https?://[^/]+ ]] ||
  bad_usage "--controller $controller is not an http(s) URL: write http://HOST:PORT or https://HOST"

if [ -z "$name" ]; then
  # The default of adv agent: the host name's first label, as a DNS label.
  name=$(uname -n 2>/dev/null || echo agent)
  name=$(printf '%s' "${name%%.*}" | tr '[:upper:]' '[:lower:]' | tr -c 'a-z0-9-' '-' | sed -e 's/^-*//' -e 's/-*$//')
  name=${name:0:63}
  name=${name%-}
  [ -n "$name" ] || name=agent
  [[ "$name" =~ $dns_label ]] || bad_usage "the host name does not make a DNS label: pass --name NAME"
fi
[[ "$name" =~ $dns_label ]] ||
  bad_usage "--name $(printf '%q' "$name") is not a DNS label: lowercase letters, digits and -, at most 63, no - at either end"
for l in ${labels[@]+"${labels[@]}"}; do
  [[ "$l" =~ $label_re ]] ||
    bad_usage "--label $(printf '%q' "$l") is not key=value (key: letters, digits, . _ - /; value: letters, digits, . _ -, at most 63)"
done
for p in ${pools[@]+"${pools[@]}"}; do
  [[ "$p" =~ $dns_label ]] || bad_usage "--pool $(printf '%q' "$p") is not a pool name (a DNS label, as the Backend's agent.pool)"
done
if [ -n "$user" ]; then
  [[ "$user" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]*$ ]] || bad_usage "--user $(printf '%q' "$user") is not a user name"
fi
if [ -n "$state_dir" ]; then
  unit_safe --state-dir "$state_dir"
  case "$state_dir" in
    /*) state_dir=${state_dir%/} ;;
    *) bad_usage "--state-dir $state_dir must be an absolute path" ;;
  esac
  [ -n "$state_dir" ] || bad_usage "--state-dir cannot be /"
fi
[ -z "$adv" ] || unit_safe --adv "$adv"
# Flags after --: the unit sets these four itself.
for a in ${extra[@]+"${extra[@]}"}; do
  unit_safe "(after --)" "$a"
  case "$a" in
    --controller | --controller=* | --enroll-token-file | --enroll-token-file=* | --name | --name=* | --state-dir | --state-dir=*)
      bad_usage "${a%%=*} after -- : use this script's own flag (--controller, --token-file, --name, --state-dir)"
      ;;
  esac
done

# --- preconditions (exit 1) -----------------------------------------------------------------------

me=$(id -un 2>/dev/null || echo "uid $(id -u)")
host=$(uname -n 2>/dev/null || echo 'this host')
if [ "$dry" = 1 ]; then
  echo "AdventureTime agent enrollment on $host: DRY RUN (as $me): nothing is written, nothing is run"
else
  echo "AdventureTime agent enrollment on $host"
  [ "$(id -u)" = 0 ] || failed "run it as root (sudo bash enroll-agent.sh ...), or add --dry-run to see what it would do"
  { command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; } ||
    failed "systemd is not running here (no systemctl, or /run/systemd/system is missing): start 'adv agent' another way (docs/deploy.md, \"Pull agents\")"
fi
echo
echo "Checks:"
ok() { printf '  ok       %s\n' "$*"; }
note() { printf '  note     %s\n' "$*"; }

# The service user: --user, else whoever ran sudo, else the current user. Never root by default.
if [ -z "$user" ]; then
  if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
    user=$SUDO_USER
  elif [ "$(id -u)" != 0 ]; then
    user=$me
  else
    bad_usage "say which account the agent and its jobs run as: --user USER (an existing user; --user root only if you mean it)"
  fi
fi
passwd_line=$(getent passwd "$user" 2>/dev/null || awk -F: -v u="$user" '$1 == u' /etc/passwd 2>/dev/null || true)
[ -n "$passwd_line" ] ||
  failed "user $user does not exist. This script never creates users: create it first, e.g. sudo useradd --create-home --shell /bin/bash $user"
user_home=$(printf '%s\n' "$passwd_line" | head -n1 | cut -d: -f6)
group=$(id -gn "$user")
{ [ -n "$user_home" ] && [ -d "$user_home" ]; } ||
  failed "the home dir of $user (${user_home:-none}) does not exist: the service starts there and jobs use it (caches, ~/.local); create it (sudo mkhomedir_helper $user) or choose another --user"
unit_safe "the home dir of $user" "$user_home"
[[ "$group" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]*$ ]] || failed "the group of $user ($group) is not a name systemd takes"
ok "user $user (group $group, home $user_home)"
[ "$user" != root ] || note "the agent and every job it runs will run as root: prefer an ordinary account (--user USER)"
[ -n "$state_dir" ] || state_dir=$user_home/.adventuretime/agent

# adv: --adv, else the PATH (sudo resets PATH to its secure_path: an adv elsewhere needs --adv).
if [ -n "$adv" ]; then
  case "$adv" in
    /*) ;;
    */*) adv="$(cd "$(dirname "$adv")" 2>/dev/null && pwd)/$(basename "$adv")" ;;
    *) adv=$(command -v "$adv" 2>/dev/null || echo "$adv") ;;
  esac
  { [ -f "$adv" ] && [ -x "$adv" ]; } || failed "--adv $adv is not an executable file"
  unit_safe --adv "$adv"
else
  adv=$(command -v adv 2>/dev/null || true)
  case "$adv" in
    /*) ;;
    *)
      failed "adv is not in PATH ($PATH). Install AdventureTime on this host (npm ci && npm run build in a checkout, then npm link or a symlink of dist/cli/adv.js to /usr/local/bin/adv); if adv is installed for your user only, pass its path: sudo bash enroll-agent.sh --adv \"\$(command -v adv)\" ..."
      ;;
  esac
  unit_safe "adv (from PATH)" "$adv"
fi

# Node.js: the interpreter adv's "#!" line names (usually /usr/bin/env node: looked up beside adv, then in PATH).
search_path="$(dirname "$adv"):$PATH"
node_prog=node
node=""
first=""
IFS= read -r first <"$adv" 2>/dev/null || true
if [ "${first#\#!}" != "$first" ]; then
  read -r interp arg1 arg2 _ <<<"${first#\#!}" || true
  case "${interp:-}" in
    */env)
      node_prog=${arg1:-node}
      [ "$node_prog" != -S ] || node_prog=${arg2:-node}
      ;;
    /*) node=$interp ;;
  esac
fi
if [ -z "$node" ]; then
  node=$(PATH=$search_path command -v "$node_prog" 2>/dev/null || true)
fi
node_hint='install Node.js >= 20 (Debian 13+: apt-get install nodejs; older Debian/Ubuntu: the NodeSource nodejs 20 packages; RHEL-likes: dnf module enable nodejs:20 && dnf install nodejs), or pass --adv with the adv beside your node'
{ [ -n "$node" ] && [ -x "$node" ]; } || failed "Node.js ($node_prog, which $adv runs with) is not found beside adv or in PATH: $node_hint"
unit_safe "node" "$node"
node_version=$("$node" --version 2>/dev/null || true)
node_major=${node_version#v}
node_major=${node_major%%.*}
case "$node_major" in
  '' | *[!0-9]*) failed "$node --version does not run (got '${node_version}'): $node_hint" ;;
esac
[ "$node_major" -ge 20 ] || failed "Node.js $node_version at $node is too old: adv needs >= 20; $node_hint"
ok "Node.js $node_version ($node)"

# The unit's PATH: node's and adv's dirs, then the usual ones (a service reads no ~/.bashrc).
svc_path=""
IFS=: read -r -a std_dirs <<<"$STD_PATH"
for d in "$(dirname "$node")" "$(dirname "$adv")" "${std_dirs[@]}"; do
  case ":$svc_path:" in
    *":$d:"*) ;;
    *) svc_path=${svc_path:+$svc_path:}$d ;;
  esac
done

# adv agent --help, as the service user with the unit's PATH: the user can run it, and it has `agent`.
as_user=()
as_who=$user
if [ "$(id -u)" = 0 ] && [ "$user" != root ]; then
  if command -v runuser >/dev/null 2>&1; then
    as_user=(runuser -u "$user" --)
  elif command -v setpriv >/dev/null 2>&1; then
    as_user=(setpriv "--reuid=$user" "--regid=$group" --init-groups --)
  else
    as_who=root
  fi
elif [ "$user" != "$me" ]; then
  as_who=$me
fi
help_out=$(cd / && ${as_user[@]+"${as_user[@]}"} env -i "HOME=$user_home" "PATH=$svc_path" "$adv" agent --help 2>&1) ||
  failed "'$adv agent --help' failed as $as_who: $(printf '%s' "$help_out" | tail -n 3)"
case "$help_out" in
  *--enroll-token-file*) ;;
  *) failed "$adv has no 'adv agent' command (too old?): install a version with pull agents" ;;
esac
ok "adv $adv ('adv agent --help' runs as $as_who)"
[ "$as_who" = "$user" ] || note "checked as $as_who, not as $user: make sure $user can read and run $adv and $node"
for a in ${extra[@]+"${extra[@]}"}; do
  case "$a" in
    --*)
      f=${a%%=*}
      case "$help_out" in
        *"$f "* | *"$f,"*) ;;
        *) bad_usage "$f (after --) is not a flag of 'adv agent' (see $adv agent --help)" ;;
      esac
      ;;
  esac
done

# The enrollment token: readable and not empty. Its value is never printed.
{ [ -f "$token_file" ] && [ -r "$token_file" ]; } || failed "--token-file $token_file is not a readable file (as $me)"
token_bytes=$(wc -c <"$token_file" | tr -d ' ')
[ -n "$(tr -d '[:space:]' <"$token_file")" ] ||
  failed "--token-file $token_file is empty: put the value of the agent Backend's tokenSecret in it"
ok "enrollment token in $token_file ($token_bytes bytes, not shown)"
token_mode=$(stat -c %a "$token_file" 2>/dev/null || echo '')
case "$token_mode" in
  *[1-7]) note "$token_file is readable by other users (mode $token_mode): delete it once enrolled" ;;
esac

case "$controller" in
  http://127.* | http://localhost[:/]* | http://localhost | http://\[::1\]*) ok "controller $controller" ;;
  http://*)
    ok "controller $controller"
    note "http:// sends the agent's token in clear text: across any network you do not trust, put a TLS proxy in front of the controller and use https://"
    ;;
  *) ok "controller $controller" ;;
esac
if [ "$dry" = 1 ]; then
  note "dry run: the controller is not contacted"
else
  # A GET of /healthz (the same listener as the agents' API); a warning only: the agent keeps retrying.
  probe=$("$node" -e '
    fetch(process.argv[1].replace(/\/+$/, "") + "/healthz", { signal: AbortSignal.timeout(8000) })
      .then((r) => console.log(r.status), (e) => console.log("error " + ((e.cause && e.cause.message) || e.message)));
  ' "$controller" 2>&1 || true)
  case "$probe" in
    200) ok "the controller answers ($controller/healthz)" ;;
    421) note "the controller refuses the host name of $controller (421): start it with --dashboard-host <that name>, or let the proxy send Host 127.0.0.1" ;;
    *) note "cannot check the controller at $controller/healthz ($probe): the agent will keep retrying; is it started with --http, and reachable from here?" ;;
  esac
fi

# The state dir: its owner must be the user. Missing dirs are created for the user.
make_dirs=()
if [ -e "$state_dir" ]; then
  [ -d "$state_dir" ] || failed "--state-dir $state_dir exists and is not a directory"
  owner=$(stat -c %U "$state_dir" 2>/dev/null || echo '?')
  [ "$owner" = "$user" ] || failed "the state dir $state_dir belongs to $owner, not $user: sudo chown -R $user: $state_dir, or choose another --state-dir"
  ok "state dir $state_dir"
  if [ -f "$state_dir/agent.json" ]; then
    # Name and controller only: the file also holds the agent's token, which is never printed.
    saved=$("$node" -e '
      try { const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(s.name + " " + s.controller); } catch { console.log("?"); }
    ' "$state_dir/agent.json" 2>/dev/null || echo '?')
    if [ "$saved" = '?' ]; then
      note "$state_dir/agent.json exists but cannot be read as $me: the agent uses it if it names $name and $controller"
    elif [ "$saved" = "$name $controller" ]; then
      note "already enrolled as $name with $controller ($state_dir/agent.json): the agent keeps its token; the enrollment token is not used"
    else
      note "$state_dir/agent.json is an enrollment as '$saved': the agent enrolls again as $name with $controller"
    fi
  fi
else
  d=$state_dir
  while [ -n "$d" ] && [ ! -e "$d" ]; do
    make_dirs=("$d" ${make_dirs[@]+"${make_dirs[@]}"})
    d=${d%/*}
  done
  [ -z "$d" ] || [ -d "$d" ] || failed "$d (in --state-dir $state_dir) is not a directory"
  ok "state dir $state_dir (created, mode 0700, owner $user)"
fi

# --- what gets written ------------------------------------------------------------------------------

exec_args=("$adv" agent --name "$name" --state-dir "$state_dir" --enroll-token-file "$TOKEN_DEST")
for l in ${labels[@]+"${labels[@]}"}; do exec_args+=(--label "$l"); done
for p in ${pools[@]+"${pools[@]}"}; do exec_args+=(--pool "$p"); done
exec_args+=(${extra[@]+"${extra[@]}"})
exec_start="${exec_args[*]}"

env_text="# $ENV_DEST: the environment of the $UNIT_NAME unit. Written by enroll-agent.sh:
# running it again rewrites this file. systemd reads it as root; KEY=value, no shell expansion.

# The controller (its --http address, or the TLS proxy in front of it). adv agent reads it.
ADV_CONTROLLER_URL=$controller

# Where adv finds node, and jobs and the capability probe find python3, uv and nvidia-smi. A
# service reads no ~/.bashrc or ~/.profile: put a conda env's or a module's bin dir first here.
PATH=$svc_path
"

unit_text="# $UNIT_NAME: this host pulls AdventureTime jobs from a controller that cannot reach it
# (docs/deploy.md, \"Pull agents\"). Written by deploy/worker/enroll-agent.sh: run it again to change
# the flags (it rewrites this file); for local changes use systemctl edit $UNIT_NAME.

[Unit]
Description=AdventureTime pull agent (claims jobs from the controller)
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
User=$user
Group=$group
# ADV_CONTROLLER_URL and PATH. systemd reads it as root before dropping privileges. systemd also
# sets HOME, USER, LOGNAME and SHELL of the user; jobs get those and PATH, nothing else of this unit.
EnvironmentFile=$ENV_DEST
WorkingDirectory=~
# The agent token lives in the state dir (agent.json, mode 0600) and is never logged; the enrollment
# token file is read only while the agent has no token (empty it once enrolled, if you like).
# No shell reads the next line: systemd splits it at spaces and expands \$VAR and %-specifiers itself,
# which is why enroll-agent.sh refuses values with spaces, quotes, \$, %, ; or backslashes.
ExecStart=$exec_start
Restart=always
RestartSec=5
# Exit 8: the controller refused this agent for good (revoked, enrollment refused): no restart loop.
RestartPreventExitStatus=8
# Jobs are detached \`adv exec\` processes in their own process groups, inside this unit's cgroup.
# KillMode=process: systemd signals the agent alone, never its jobs.
# - systemctl stop/restart: SIGTERM to the agent, which stops claiming, sends its jobs SIGTERM (they
#   checkpoint; the attempt resumes from it), reports them and exits.
# - The agent crashes or is killed (OOM, SIGKILL): its jobs keep running, Restart=always starts it
#   again and it takes them back from its state dir. Until then nobody renews their lease.json and
#   adv exec stops a job whose lease runs out, so no attempt ever runs twice. On such a start systemd
#   logs \"Found left-over process ... in control group\": that is expected.
KillMode=process
KillSignal=SIGTERM
# Time for the jobs to checkpoint and be reported. Then systemd SIGKILLs the agent (only the agent:
# a job still running stops itself when its lease runs out).
TimeoutStopSec=120
# A job killed by the kernel's OOM killer ends that attempt only, not the agent and its other jobs.
OOMPolicy=continue
LimitNOFILE=65536
UMask=0077
# Pino JSON lines: journalctl -u $UNIT_NAME -o cat
StandardOutput=journal
StandardError=journal

# Hardening that leaves jobs working (older systemd ignores a setting it does not know, with a warning).
# NoNewPrivileges also stops setuid helpers a job may call: nvidia-modprobe (when CUDA fails here but
# works in a shell, create the device nodes at boot: nvidia-modprobe -u -c=0), newuidmap (rootless
# podman), sudo. Override with systemctl edit if a job needs them.
NoNewPrivileges=yes
# /usr, /boot and /etc read-only; the home dir, /opt, /srv, /var and /tmp stay writable.
ProtectSystem=full
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
LockPersonality=yes
# Not set on purpose:
#   PrivateTmp       a private /tmp is removed when the unit stops, under jobs that outlive the agent
#   ProtectHome      jobs need the home dir (state dir, caches, conda, ~/.local)
#   PrivateDevices, DevicePolicy, ProtectClock   GPUs are /dev/nvidia* (ProtectClock adds a device rule)
#   RestrictNamespaces   jobs may run containers (apptainer, podman)
#   MemoryDenyWriteExecute   V8's JIT needs writable code pages
#   CapabilityBoundingSet   a job of --user root keeps root's powers; use an ordinary user instead

[Install]
WantedBy=multi-user.target
"

# --- write and start ------------------------------------------------------------------------------

show_file() { # path, mode, owner, text
  echo
  echo "--- $1 (mode $2, owner $3) ---"
  printf '%s' "$4"
  echo "--- end of $1 ---"
}
quoted() {
  local out="" a
  for a in "$@"; do out+="$(printf '%q' "$a") "; done
  printf '%s' "${out% }"
}
run() {
  if [ "$dry" = 1 ]; then
    printf '  %s\n' "$(quoted "$@")"
  else
    printf '+ %s\n' "$(quoted "$@")"
    "$@"
  fi
}

if [ "$dry" = 1 ]; then
  echo
  echo "Would write these files (nothing is written in a dry run):"
  [ -d "$ETC_DIR" ] || echo "  $ETC_DIR/ (a directory, mode 0755, owner root)"
  for d in ${make_dirs[@]+"${make_dirs[@]}"}; do echo "  $d/ (a directory, mode 0700, owner $user:$group)"; done
  echo "  $TOKEN_DEST (mode 0600, owner $user:$group): a copy of $token_file ($token_bytes bytes, not shown)"
  show_file "$ENV_DEST" 0600 root:root "$env_text"
  show_file "$UNIT_DEST" 0644 root:root "$unit_text"
  echo
  echo "Would run:"
  run systemctl daemon-reload
  run systemctl enable --now "$UNIT_NAME"
  echo "  systemctl restart $UNIT_NAME   # only when it was running already and a file changed"
  echo
  echo "Dry run: nothing was written and nothing was run. Without --dry-run (as root) this enrolls $name."
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
changed=0
# put SRC DEST MODE OWNER GROUP [keep]: installs SRC unless DEST already has that content.
put() {
  if [ -f "$2" ] && cmp -s "$1" "$2"; then
    run chown "$4:$5" "$2"
    run chmod "$3" "$2"
    return
  fi
  changed=1
  if [ "${6:-}" = keep ] && [ -f "$2" ]; then
    run cp -p "$2" "$2.previous"
  fi
  run install -m "$3" -o "$4" -g "$5" "$1" "$2"
}

echo
[ -d "$ETC_DIR" ] || run install -d -m 0755 -o root -g root "$ETC_DIR"
for d in ${make_dirs[@]+"${make_dirs[@]}"}; do run install -d -m 0700 -o "$user" -g "$group" "$d"; done
# The token is copied by install (never through a shell variable or a command line).
if [ "$token_file" -ef "$TOKEN_DEST" ]; then
  run chown "$user:$group" "$TOKEN_DEST"
  run chmod 0600 "$TOKEN_DEST"
else
  put "$token_file" "$TOKEN_DEST" 0600 "$user" "$group"
fi
printf '%s' "$env_text" >"$tmp/agent.env"
put "$tmp/agent.env" "$ENV_DEST" 0600 root root keep
printf '%s' "$unit_text" >"$tmp/unit"
put "$tmp/unit" "$UNIT_DEST" 0644 root root keep

was_active=0
systemctl is-active --quiet "$UNIT_NAME" && was_active=1
run systemctl daemon-reload
run systemctl enable --now "$UNIT_NAME"
if [ "$was_active" = 1 ]; then
  if [ "$changed" = 1 ]; then
    echo "The agent was running and a file changed: restarting it. Its jobs stop gracefully (they checkpoint and resume)."
    run systemctl restart "$UNIT_NAME"
  else
    echo "Nothing changed: the running agent is left alone."
  fi
fi

# Watch it for 15 s: a refused token or a bad flag makes it exit (and systemd restart it).
echo
echo "Waiting 15 s to see the agent stay up..."
for _ in $(seq 15); do
  sleep 1
  if ! systemctl is-active --quiet "$UNIT_NAME"; then
    echo
    journalctl -u "$UNIT_NAME" -n 25 --no-pager -o cat 2>/dev/null || true
    failed "$UNIT_NAME does not stay up: see its log above (journalctl -u $UNIT_NAME -o cat)"
  fi
done
if [ -f "$state_dir/agent.json" ]; then
  echo "OK: $UNIT_NAME runs, enrolled as $name with $controller."
else
  echo "OK: $UNIT_NAME runs; it has not enrolled yet (is the controller reachable?)."
fi
echo
echo "Check it:"
echo "  systemctl status $UNIT_NAME"
echo "  journalctl -u $UNIT_NAME -f -o cat        # JSON lines: 'enrolled', 'claimed', 'reported'"
echo "On the controller's side (its API token: ADV_API_TOKEN, or run as its user with --data-dir):"
echo "  adv get agents --controller URL            # $name should be Ready"
echo "  adv agent drain $name | adv agent resume $name | adv agent revoke $name"
echo "Once it is enrolled you may empty $TOKEN_DEST (truncate -s 0): it is needed only to enroll again."
