#!/usr/bin/env bash
# Builds the journal reader's libFuzzer target with AddressSanitizer:
# GraphJournal's sources and Tools/Fuzz/JournalReaderFuzz.swift as one module, the CRC32C C
# file beside it. Output: .build/fuzz/journal-reader-fuzz
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.build/fuzz
mkdir -p "$out/include"
cat > "$out/include/module.modulemap" <<MAP
module CCRC32C {
    header "$PWD/Sources/CCRC32C/include/CCRC32C.h"
    export *
}
MAP
clang -c -O1 -g -fsanitize=address,fuzzer-no-link -I Sources/CCRC32C/include Sources/CCRC32C/CRC32C.c -o "$out/CRC32C.o"
swiftc -parse-as-library -module-name GraphJournal -package-name ObjectGraph -swift-version 6 -O -g \
    -enable-upcoming-feature ExistentialAny -enable-upcoming-feature InternalImportsByDefault \
    -sanitize=fuzzer,address \
    -I Sources/CLZ4 -I "$out/include" \
    $(find Sources/GraphJournal -name "*.swift") Tools/Fuzz/JournalReaderFuzz.swift "$out/CRC32C.o" -llz4 \
    -o "$out/journal-reader-fuzz" 2> >(grep -v "Cannot export local symbol '__asan" >&2)
echo "$out/journal-reader-fuzz"
