#!/usr/bin/env bash
# Prints the java command of a JDK 22+ (the library needs the Foreign Function & Memory API): $JAVA_HOME's,
# else the java on PATH, else the newest under /usr/lib/jvm, /opt/java or /usr/local. Exits 1, saying so,
# when there is none.
set -uo pipefail
feature() { # the feature release of a java command, e.g. 17 or 25; nothing when it does not run
  "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p'
}
candidates=()
[[ -n ${JAVA_HOME:-} ]] && candidates+=("$JAVA_HOME/bin/java")
command -v java >/dev/null 2>&1 && candidates+=("$(command -v java)")
for jdk in $(ls -d /usr/lib/jvm/*/ /opt/java/*/ /usr/local/*jdk*/ 2>/dev/null | sort -rV); do
  candidates+=("${jdk%/}/bin/java")
done
for java in "${candidates[@]}"; do
  [[ -x $java ]] || continue
  version=$(feature "$java")
  if (( ${version:-0} >= 22 )); then
    echo "$java"
    exit 0
  fi
done
echo "no JDK 22 or newer found (looked at JAVA_HOME, the java on PATH, /usr/lib/jvm, /opt/java, /usr/local):" \
  "install one (e.g. Temurin 25) or set JAVA_HOME to it" >&2
exit 1
