#!/usr/bin/env bash
# The Java binding built the way Java projects build: `mvn package` on
# bindings/swig/java/pom.xml, offline, from the repository Debian's
# packages install (copied, links resolved, into a temporary local
# repository so nothing is written under /usr/share), gives a jar with
# which the Java example runs its 2 ranks under ddprun with plain `java -cp`.
#   test_maven_jar.sh <build dir> <source dir>
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
command -v mvn >/dev/null || { echo "skipped: mvn not found (scripts/bootstrap.sh installs maven)"; exit 77; }
[ -d /usr/share/maven-repo/org/apache/maven/plugins/maven-compiler-plugin ] ||
  { echo "skipped: Debian's Maven plugins are not installed (scripts/bootstrap.sh installs them)"; exit 77; }
[ -d "$build/bindings/java/src/org/libddp" ] || { echo "skipped: the SWIG Java binding is not built"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -rL /usr/share/maven-repo "$work/repo"
mvn -o -q -Dmaven.repo.local="$work/repo" -Dddp.build="$build" -f "$src/bindings/swig/java/pom.xml" package
jar=$(ls "$build"/bindings/java/maven/libddp-*.jar)
# The listing is read whole first: under pipefail, `unzip | grep -q` fails
# whenever grep stops reading before unzip has written everything.
listing=$(unzip -l "$jar")
grep -q "org/libddp/native/libddp_java.so" <<<"$listing" || { echo "FAIL: $jar lacks libddp_java.so"; exit 1; }
javac -nowarn -cp "$jar" -d "$work/classes" "$src/examples/java/AllReduceAndGradSync.java"
out=$(OMP_NUM_THREADS=1 "$build/tools/ddprun" --standalone --nproc-per-node 2 java -cp "$jar:$work/classes" AllReduceAndGradSync 2>&1)
echo "$out" | grep "all_reduce SUM"
for r in 0 1; do
  grep -q "\[rank $r\] all_reduce SUM" <<<"$out" || { echo "FAIL: rank $r did not run: $out"; exit 1; }
done
echo "PASS: mvn -o package built $(basename "$jar"), which runs 2 ranks with java -cp"
