#!/usr/bin/env bash
# Compiles and runs the Java binding's JUnit 4 tests (Debian's junit4 and
# hamcrest jars).   run_java_tests.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
jars=/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar
for j in /usr/share/java/junit4.jar /usr/share/java/hamcrest-core.jar; do
  [ -f "$j" ] || { echo "missing $j: install junit4 (scripts/bootstrap.sh does)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp="$build/bindings/java/libddp.jar:$jars:$tmp"
javac -nowarn -d "$tmp" -cp "$cp" "$src"/tests/bindings/java/*.java
OMP_NUM_THREADS=1 java -Djava.library.path="$build/bindings/java" -Dddp.ddprun="$build/tools/ddprun" -cp "$cp" \
  org.junit.runner.JUnitCore LibddpJavaTest
