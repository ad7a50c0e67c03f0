//! The store's version read without a lock or a system call: the header of SQLite's wal-index, read where SQLite
//! keeps it in this process's memory.
//!
//! Every decision that changes nothing asks the store whether it changed since the state it cached
//! ([`super::state_cache`]). `PRAGMA data_version` answers that, but it opens and closes a read transaction: two
//! `fcntl` locks on the `-shm` file and a statement, about 7 µs, 5% of the proxy's CPU per denied call (bench/mcp,
//! a frame-pointer profile). SQLite itself answers the same question before every read transaction from the wal-index
//! header, without a lock: the file format documents it (<https://www.sqlite.org/walformat.html>, "the wal-index
//! header"), and every process that writes the database in WAL mode updates it at each commit. So this reads it too.
//!
//! What is read: the header's two copies (48 bytes each, at the start of the `-shm` file, in the machine's byte
//! order). A writer writes the second copy, then a memory barrier, then the first; a reader reads the first, a
//! barrier, the second, and trusts them only when they are equal (SQLite's `walIndexTryHdr`). `iChange` is
//! incremented at every commit (and when the WAL restarts), `mxFrame` is the last frame committed: the version is
//! the two together. When the copies differ (a writer is between them) or the header is not initialized, there is
//! no version (`None`): the caller then reads through a transaction, which is always right.
//!
//! Where it is read: SQLite's own mapping of the `-shm` file's first region, obtained from the connection's file
//! (`SQLITE_FCNTL_FILE_POINTER`, then the VFS's `xShmMap` for the region SQLite already mapped). It stays mapped
//! while that connection is open, so [`WalIndexHeader`] owns the connection that mapped it. Unix only; elsewhere,
//! and whenever the mapping cannot be had, the store falls back to `PRAGMA data_version`.

use std::sync::atomic::{fence, AtomicU32, Ordering};

use rusqlite::{ffi, Connection};

/// The size of a wal-index region, as SQLite maps them (`WALINDEX_PGSZ`).
const REGION: i32 = 32 * 1024;
/// One copy of the header, in 32-bit words (`sizeof(WalIndexHdr)` is 48 bytes).
const WORDS: usize = 12;
/// Where `iChange`, the byte `isInit` and `mxFrame` are, in words from a copy's start.
const I_CHANGE: usize = 2;
const IS_INIT: usize = 3;
const MX_FRAME: usize = 4;

/// A connection kept open for the mapping of its wal-index, and where the header is in it. The connection is never
/// used again: it is owned here so that the mapping lives exactly as long as this value (SQLite unmaps it when the
/// connection closes), which is what makes [`WalIndexHeader::version`] sound.
#[derive(Debug)]
pub struct WalIndexHeader {
    _mapped_by: Connection,
    address: usize,
}

impl WalIndexHeader {
    /// The header of `connection`'s wal-index, the connection kept with it; the connection back when there is none to
    /// read (another journal mode, a VFS without shared memory, not unix). The connection must be in WAL mode and have
    /// read once (SQLite maps the wal-index at the first read).
    #[cfg(unix)]
    #[allow(unsafe_code)]
    pub fn of(connection: Connection) -> Result<WalIndexHeader, Connection> {
        let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
        // SAFETY: the handle is `connection`'s, open for the whole call; `SQLITE_FCNTL_FILE_POINTER` writes one
        // pointer, to the main database's `sqlite3_file`, into `file`.
        let found = unsafe {
            ffi::sqlite3_file_control(
                connection.handle(),
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_FILE_POINTER,
                (&raw mut file).cast(),
            )
        };
        if found != ffi::SQLITE_OK || file.is_null() {
            return Err(connection);
        }
        // SAFETY: `file` is the open connection's database file, whose methods live as long as it does; `xShmMap`
        // exists from version 2 of `sqlite3_io_methods` on, which is checked first.
        let map = unsafe {
            let methods = (*file).pMethods;
            if methods.is_null() || (*methods).iVersion < 2 {
                return Err(connection);
            }
            (*methods).xShmMap
        };
        let Some(map) = map else { return Err(connection) };
        let mut region: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: region 0 of the wal-index, not extended (`bExtend` 0): SQLite hands back the region it mapped at
        // the connection's first read, or a null pointer when there is none. Nobody else uses the connection
        // meanwhile (it was moved here).
        let mapped = unsafe { map(file, 0, REGION, 0, &raw mut region) };
        if mapped != ffi::SQLITE_OK || region.is_null() || region.align_offset(std::mem::align_of::<u32>()) != 0 {
            return Err(connection);
        }
        Ok(WalIndexHeader { _mapped_by: connection, address: region as usize })
    }

    #[cfg(not(unix))]
    pub fn of(connection: Connection) -> Result<WalIndexHeader, Connection> {
        Err(connection)
    }

    /// `iChange` and `mxFrame` of the header as it is now, or `None` while a writer is changing it (or before it is
    /// initialized).
    #[allow(unsafe_code)]
    pub fn version(&self) -> Option<u64> {
        let words = self.address as *mut u32;
        let copy = |first: usize| -> [u32; WORDS] {
            std::array::from_fn(|i| {
                // SAFETY: the mapping is at least a region (32 KiB) long and stays mapped while `_mapped_by` is open,
                // that is while `self` lives; the address is aligned for `u32` (checked in `of`). Other processes
                // write these words: read as atomics, never through a reference to plain memory.
                unsafe { AtomicU32::from_ptr(words.add(first + i)) }.load(Ordering::Relaxed)
            })
        };
        let first = copy(0);
        // SQLite's `walShmBarrier` on both sides: the writer's second copy is written before its first.
        fence(Ordering::SeqCst);
        let second = copy(WORDS);
        let initialized = first[IS_INIT].to_ne_bytes()[0] != 0;
        (first == second && initialized).then(|| u64::from(first[I_CHANGE]) << 32 | u64::from(first[MX_FRAME]))
    }
}
