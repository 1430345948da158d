#!/usr/bin/env bash
# Builds the quickstart against the installed mstar-transport and runs each producer and consumer pair as
# two processes, on the class path and on the module path. Exits non-zero when a run fails.
set -euo pipefail
cd "$(dirname "$0")"
mvn -B -q compile

CLASS_PATH=(--enable-native-access=ALL-UNNAMED --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  -cp "target/classes:target/lib/*")
MODULE_PATH=(--enable-native-access=io.mstar.transport,com.sun.jna --add-exports java.base/jdk.internal.misc=org.agrona
  -p target/lib --add-modules io.mstar.transport -cp target/classes)
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

export MSTAR_SHM_ARENA=1
export MSTAR_SHM_DIR
MSTAR_SHM_DIR=$(mktemp -d /dev/shm/mstar-quickstart-XXXXXX)
trap 'rm -rf "$MSTAR_SHM_DIR"' EXIT

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

pair CLASS_PATH quickstart.Consumer quickstart.Producer
pair MODULE_PATH quickstart.Consumer quickstart.Producer
pair CLASS_PATH quickstart.FastConsumer quickstart.FastProducer 100000
pair MODULE_PATH quickstart.FastConsumer quickstart.FastProducer 100000
