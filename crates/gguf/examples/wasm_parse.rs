//! A tiny wasm module for timing the GGUF reader inside a JavaScript engine
//! (`bench/gguf/parse.sh`): `alloc(len)` reserves room for the file in wasm memory,
//! `parse_header(ptr, len)` parses the header and tensor table and returns the tensor
//! count (or -1). Native builds compile it too, as a plain library.

/// Reserves `len` bytes in linear memory for the caller to fill; never freed (one file
/// per instance).
#[unsafe(no_mangle)]
pub extern "C" fn alloc(len: usize) -> *mut u8 {
    let mut v = vec![0u8; len];
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

/// Parses the header and tensor table of the `len` bytes at `ptr`.
///
/// # Safety
/// `ptr..ptr + len` must be memory returned by [`alloc`] and filled by the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn parse_header(ptr: *const u8, len: usize) -> i64 {
    // SAFETY: the caller passes a region it got from `alloc` (see above).
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
    match stampo_gguf::Gguf::parse_header(bytes) {
        Ok(g) => g.tensors().len() as i64,
        Err(_) => -1,
    }
}
