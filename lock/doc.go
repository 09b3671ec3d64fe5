// Package lock is a Redis lock with a lease: one owner at a time per key,
// identified by a random token, released or refreshed only by that owner.
//
// # What it guarantees, and what it does not
//
// It is an efficiency lock. While Redis keeps the key, at most one caller
// holds it, and Release and Refresh never touch a key that another owner set
// (they compare the token and act in one Lua script). Obtain is safe against
// go-redis retrying a command whose reply was lost: the retry finds its own
// token and succeeds instead of reporting the key busy.
//
// It does not make work happen exactly once. A Redis failover (replication is
// asynchronous), a restart without persistence, a FLUSHALL or an eviction
// can lose a key while its owner still works, and a process that pauses (GC,
// a stopped VM, a slow disk) can outlive its TTL and keep working after
// another caller obtained the key. KeepAlive and Deadline narrow that window
// but cannot close it: nothing stops a paused process from acting on what it
// believed a moment ago. Correctness must come from the database — in paylock,
// the UNIQUE constraint on the transaction id decides; the lock only saves
// the duplicate work and the noise of constraint violations.
//
// # Choosing a TTL
//
// Without KeepAlive, the TTL must exceed the p99.9 duration of the guarded
// work, with margin, or the lock will expire under slow work and let a second
// worker in. With KeepAlive, the watchdog refreshes every TTL/3 and the TTL
// only bounds how long a crashed holder blocks everyone else, so it can be a
// few seconds whatever the work takes; do the work under the returned context
// so that it stops when the lease cannot be confirmed.
//
// # Client settings
//
// The context passed to each method bounds its Redis call only when the
// go-redis client has ContextTimeoutEnabled set; without it go-redis waits
// for its ReadTimeout and WriteTimeout whatever the context says. Set
// ContextTimeoutEnabled: true, and set ReadTimeout and WriteTimeout (and
// DialTimeout) well below the shortest TTL in use, so that a refresh which
// gets no answer fails, and is retried, while the lease still runs. go-redis
// retries commands on network errors (MaxRetries, 3 by default); Obtain,
// Release and Refresh stay safe when it does: none of them ever acts on
// another owner's key. (A Release whose first reply was lost and which
// go-redis retried reports ErrNotHeld although it did delete the key.)
//
// Release and Refresh return ErrNotHeld when the key is no longer ours;
// Obtain returns ErrNotObtained only when another owner holds the key, and
// never for a transport error, a timeout or a cancelled context.
package lock
