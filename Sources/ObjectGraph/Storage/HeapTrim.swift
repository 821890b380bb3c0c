#if canImport(Glibc)
    import Glibc
#endif

/// Returning freed heap memory to the system.
enum HeapTrim {
    /// Calls glibc's `malloc_trim(0)`, which releases the free memory at the top of the heap
    /// and the free pages inside it, when the C library has it (looked up by name: `malloc.h`
    /// is not in the Glibc module). Without it, glibc keeps a large freed heap resident.
    static func trim() {
        #if canImport(Glibc)
            guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "malloc_trim") else { return }
            let trim = unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
            _ = trim(0)
        #endif
    }
}
