#!/usr/bin/env bash
# Builds the libFuzzer targets with AddressSanitizer. The journal reader's:
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
# The journal's encryption imports swift-crypto's Crypto: built with SwiftPM, with the fuzzer's
# coverage and AddressSanitizer, in the payload target's build folder; its modules and objects
# are handed to swiftc.
plugin="$PWD/.build/debug/ObjectGraphMacros-tool"
[ -x "$plugin" ] || swift build --target ObjectGraphMacros
OBJECTGRAPH_MACRO_PLUGIN="$plugin" swift build --build-path .build/fuzz-spm --target Crypto \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -g 2>&1 | tail -1
bin="$(OBJECTGRAPH_MACRO_PLUGIN="$plugin" swift build --build-path .build/fuzz-spm --show-bin-path)"
crypto_objects=$(find "$bin"/Crypto.build "$bin"/CCryptoBoringSSL.build "$bin"/CCryptoBoringSSLShims.build \
    "$bin"/CryptoBoringWrapper.build "$bin"/CXKCP.build "$bin"/CXKCPShims.build -name "*.o" 2>/dev/null)
module_maps=$(find .build/fuzz-spm/checkouts/swift-crypto/Sources -maxdepth 3 -name module.modulemap \
    | sed 's/^/-Xcc -fmodule-map-file=/')
swiftc -parse-as-library -module-name GraphJournal -package-name ObjectGraph -swift-version 6 -O -g \
    -enable-upcoming-feature ExistentialAny -enable-upcoming-feature InternalImportsByDefault \
    -sanitize=fuzzer,address \
    -I Sources/CLZ4 -I "$out/include" -I "$bin/Modules" $module_maps \
    $(find Sources/GraphJournal -name "*.swift") Tools/Fuzz/JournalReaderFuzz.swift "$out/CRC32C.o" $crypto_objects -llz4 \
    -o "$out/journal-reader-fuzz" 2> >(grep -v "Cannot export local symbol '__asan" >&2)
echo "$out/journal-reader-fuzz"

# The payload target (Tools/Fuzz/Payload): ObjectGraph and its dependencies built with the
# fuzzer's coverage and AddressSanitizer in their own build folder, the `@Entity` macros loaded
# from the debug build's macro executable (as `make demo` does) so that swift-syntax is not
# compiled again. Output: .build/fuzz/objectgraph-payload-fuzz
OBJECTGRAPH_MACRO_PLUGIN="$plugin" swift build --build-path .build/fuzz-spm --product objectgraph-payload-fuzz \
    -Xswiftc -DOBJECTGRAPH_PAYLOAD_FUZZ -Xswiftc -sanitize=fuzzer,address -Xswiftc -g 2>&1 | tail -3
cp "$(OBJECTGRAPH_MACRO_PLUGIN="$plugin" swift build --build-path .build/fuzz-spm --show-bin-path)/objectgraph-payload-fuzz" "$out/objectgraph-payload-fuzz"
echo "$out/objectgraph-payload-fuzz"
