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
// # Waiting for a busy key
//
// Obtain makes one attempt unless given WithRetry and a RetryStrategy:
// NoRetry (the default), LinearBackoff, ExponentialBackoff (jittered, so
// that callers waiting on one key do not poll in step), bounded with
// MaxWait (a time budget that never cuts a Redis command short, unlike a
// context deadline), LimitRetry or the context. Strategies are stateless
// values, safe to share. A key still busy at the last attempt is a
// *BusyError: it matches ErrNotObtained and carries the holder's remaining
// TTL, read by the same script that found the key busy, and how many
// attempts were made; a Lock tells the same with Attempts and Waited. A
// Finish marker (ErrFinished) and a Redis error end the wait at once. Every
// attempt is an EventObtain for the observer, numbered in Event.Attempt.
//
// # Fencing tokens
//
// A lock cannot stop a holder that paused past its TTL from acting on what
// it believed before the pause. A fencing token can, if the resource it
// writes checks it. Obtain with WithFencing also INCRs a counter kept next
// to the key, in the same script and round trip, and (*Lock).Fence returns
// the number: larger for every later fenced Obtain of the key. Pass it with
// every write the lock guards, and have the resource refuse a write whose
// fence is not larger than the last one it took, in the same statement:
//
//	UPDATE accounts SET balance = $2, fence = $3 WHERE id = $1 AND fence < $3
//
// Zero rows updated means a later holder already wrote: stop, and do not
// retry under the old lock. Every Obtain of a fenced key must use
// WithFencing, or its holders have no fence to compare.
//
// The counter is the key "{"+key+"}:fence", or key+":fence" when the key
// has a hash tag of its own ({...}); either way it hashes to the key's Redis
// Cluster slot, as one script must. A key with a '}' but no hash tag cannot
// be wrapped so and is an error. The counter has no TTL: a fence must keep
// increasing however long the key lies unused, and a counter that expired
// would start again at 1 and see every later write refused. That costs one
// small key per fenced lock key, forever: fence long-lived resources (an
// account, a ledger), not a key per request. Under an allkeys-* eviction
// policy Redis may still evict it, with the same effect as an expiry
// (refused writes, never a wrong write).
//
// The fence is retry-safe like the lock: the key holds token+"/"+fence, so
// a go-redis retry of an Obtain whose first copy was applied finds its own
// token and returns the fence that copy minted, never a second one.
//
// paylock's payment, loan and payout records need no fence: their inserts
// are arbitrated by UNIQUE constraints, which refuse a second insert
// whatever lock its writer believes it holds, and their state changes are
// forward-only UPDATE … WHERE status = current. A fence is for work that
// overwrites a value a lock holder computed, where no constraint can tell
// a stale write from a fresh one.
//
// What a Redis failover does to the sequence: replication is asynchronous,
// so a promoted replica may lack the master's last INCRs (and the lock key
// set with them) and hand out a fence again. Two holders may then hold the
// same key with fences that do not order them: the old holder's lost fence
// may equal, or (if several INCRs were lost) exceed, the new holder's. The
// strict fence < $new refuses the second of two equal fences, but an old
// holder with a larger lost fence can still overwrite the new holder's
// write. That window is bounded by the old holder's lease: its next refresh
// (KeepAlive, every TTL/3) finds the key not ours on the new master and
// cancels its lease context, and its TTL ends it at the latest. The
// consumer keeping max(fence) in the row, as the UPDATE above does, makes
// sure no fence older than the largest ever written gets in afterwards.
// This package implements the fence and that bound only; it does not WAIT
// for replicas after the INCR (which would narrow, not close, the window
// and costs a round trip per Obtain): a deployment that needs fences to
// survive a failover needs a consistent store for the counter, such as the
// database itself (a sequence, or the row's own fence + 1 taken in the
// write).
//
// # Choosing a TTL
//
// Without KeepAlive, the TTL must exceed the p99.9 duration of the guarded
// work, with margin, or the lock will expire under slow work and let a second
// worker in. With KeepAlive, the watchdog refreshes every TTL/3 and the TTL
// only bounds how long a crashed holder blocks everyone else, so it can be a
// few seconds whatever the work takes; do the work under the returned context
// so that it stops when the lease cannot be confirmed. KeepAlive costs one
// timer until the first refresh is due at TTL/3: short work starts no
// goroutine.
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
// Build the client for the deployment: a *redis.Client for one server, a
// *redis.ClusterClient for a Redis Cluster, a failover client for a
// sentinel group. CheckMode asks the server which it is (INFO server) and
// returns a *ModeError (matches ErrWrongMode) when the client was built
// for another: a standalone client given one node of a cluster would meet
// MOVED for most keys.
//
// # Errors
//
//   - Obtain: a *BusyError (matches ErrNotObtained) only when another owner
//     holds the key at the last attempt; ErrFinished for a Finish marker;
//     otherwise a wrapped error (a bad ttl or key, a transport error, a
//     timeout, a cancelled or expired context), never ErrNotObtained.
//   - Release, Finish, Refresh: ErrNotHeld when the key is no longer ours;
//     otherwise a wrapped error.
//   - TTL: 0, nil when the key is no longer ours; KeyTTL: 0, nil when the
//     key is absent; otherwise a wrapped error.
//   - KeepAlive: the lease context's cause matches ErrLeaseLost (and
//     ErrNotHeld when a refresh found the key not ours).
//   - CheckMode: a *ModeError (matches ErrWrongMode) when the server is of
//     another mode; otherwise the INFO call's error. Ping: the PING's
//     error, wrapped.
//
// # Tracing
//
// Obtain, Release and Finish start a span each (paylock.lock.obtain with
// the outcome, the attempts and the wait in milliseconds;
// paylock.lock.release with the op, release or finish) under the caller's
// span when that one records, with the tracer of WithTracerProvider (the
// global TracerProvider by default). A call outside a traced request
// starts none and costs a context lookup.
package lock
