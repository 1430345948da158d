#!/usr/bin/env bash
# Does what the README says, as a new user would: builds a project made of the README's pom and classes
# alone and runs its pair, then builds the quickstart against the installed mstar-transport and runs each
# producer and consumer pair as two processes, on the class path and on the module path. Finds a JDK 22+
# itself (jdk.sh), whatever the default java is. Exits non-zero when a run fails.
set -euo pipefail
cd "$(dirname "$0")"
JAVA=$(./jdk.sh)

CLASS_PATH=(--enable-native-access=ALL-UNNAMED --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  -cp "target/classes:target/lib/*")
MODULE_PATH=(--enable-native-access=io.mstar.transport,com.sun.jna --add-exports java.base/jdk.internal.misc=org.agrona
  -p target/lib --add-modules io.mstar.transport -cp target/classes)

export MSTAR_SHM_ARENA=1
export MSTAR_SHM_DIR
MSTAR_SHM_DIR=$(mktemp -d /dev/shm/mstar-quickstart-XXXXXX)
FROM_README=$(mktemp -d)
trap 'rm -rf "$MSTAR_SHM_DIR" "$FROM_README"' EXIT

pair() { # $1: how to run, $2 $3: consumer and producer classes, then their arguments
  local how=$1 consumer=$2 producer=$3; shift 3
  local -n flags=$how
  "$JAVA" "${flags[@]}" "$consumer" "$@" & local consumer_pid=$!
  "$JAVA" "${flags[@]}" "$producer" "$@"
  wait "$consumer_pid"
  local left; left=$(ls "$MSTAR_SHM_DIR")
  [[ -z $left ]] || { echo "files left in $MSTAR_SHM_DIR: $left"; exit 1; }
  echo "ok: $consumer and $producer on the ${how,,}"
}

# The README's pom (the one xml block) and its classes (the java blocks), as a project of their own.
mkdir -p "$FROM_README/src/main/java/quickstart"
awk -v dir="$FROM_README" '
  /^```xml$/ { out = dir "/pom.xml"; next }
  /^```java$/ { block = ""; java = 1; next }
  /^```$/ {
    if (java) { match(block, /public class [A-Za-z]+/); name = substr(block, RSTART + 13, RLENGTH - 13)
                printf "%s", block > (dir "/src/main/java/quickstart/" name ".java") }
    out = ""; java = 0; next }
  java { block = block $0 "\n"; next }
  out != "" { print > out }
' ../../README.md
(cd "$FROM_README" && mvn -B -q compile && echo "ok: the README's project builds")
(cd "$FROM_README" && pair CLASS_PATH quickstart.Consumer quickstart.Producer)

mvn -B -q compile
pair CLASS_PATH quickstart.Consumer quickstart.Producer
pair MODULE_PATH quickstart.Consumer quickstart.Producer
pair CLASS_PATH quickstart.FastConsumer quickstart.FastProducer 100000
pair MODULE_PATH quickstart.FastConsumer quickstart.FastProducer 100000

# Python beside the JVM: the same producer into a Python consumer, with the package the first command installed
# in target/python-venv (python/venv.sh says what it needs where it made none).
PYTHON=../../target/python-venv/bin/python
if [[ -x $PYTHON ]]; then
  "$PYTHON" fast_consumer.py 100000 & python_pid=$!
  "$JAVA" "${CLASS_PATH[@]}" quickstart.FastProducer 100000
  wait "$python_pid"
  left=$(ls "$MSTAR_SHM_DIR"); [[ -z $left ]] || { echo "files left in $MSTAR_SHM_DIR: $left"; exit 1; }
  echo "ok: fast_consumer.py and quickstart.FastProducer, Python beside the JVM"
else
  echo "skipped: Python beside the JVM (no $PYTHON; see python/venv.sh)"
fi

# The operator's command from a project that only depends on the artifact: its main class on the class path.
"$JAVA" "${CLASS_PATH[@]}" io.mstar.transport.cli.MstarShm --version
"$JAVA" "${CLASS_PATH[@]}" io.mstar.transport.cli.MstarShm stats --json > /dev/null && echo "ok: mstar-shm stats from the dependency"
