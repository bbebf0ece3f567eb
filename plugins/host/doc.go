// Package host launches and supervises ldpsql encoder plugins (see package
// plugins/sdk) with hashicorp go-plugin over gRPC.
//
// Every plugin process is started from an absolute path whose SHA-256 digest is
// pinned: go-plugin hashes the file right before executing it and refuses to run
// it on a mismatch ([ErrDigestMismatch]). The connection uses one-time mutual
// TLS (AutoMTLS) over a Unix socket, only the gRPC protocol is accepted, and the
// process gets none of the host's environment (only TMPDIR, if set). On Linux a
// plugin is killed when the host process dies.
//
// A [Host] keeps at most one process per [Spec].Name. [Host.Get] returns a
// [Plugin] handle bound to one generation of that name: one binary (path and
// digest) with one model artifact. Calls through a handle
//
//   - start the process again if it died or was killed (after a crash or a
//     call timeout), re-sending Load(Spec.Artifact), and check that it
//     describes itself exactly as before;
//   - fail with [ErrReplaced] once a later Get for the same name asked for a
//     different binary or artifact (the old process is stopped when its
//     in-flight calls finish);
//   - carry a deadline (Spec.CallTimeout per RPC, Spec.FitTimeout for Fit);
//     a call that runs past it kills the process ([ErrTimeout]);
//   - report a process that exits mid-call as [ErrCrashed], with the end of
//     its stderr. A call is never retried: the next call restarts the process.
//
// Plugins get finite inputs only: Encode and Decode refuse a row holding NaN or
// ±Inf ([ErrNonFiniteInput]) before anything is sent.
//
// Nothing a plugin returns is trusted beyond its shape. The host checks
// descriptions (protocol version, dimensions, a finite output set), the
// number of rows and columns of every result, and returns the values as they
// are — NaN and points outside the declared set included. Re-clipping into
// the declared set (Plugin.Describe().OutputSet, fixed for the lifetime of a
// handle) is the randomiser's job.
//
// Encode, Decode and Fit split their rows into gRPC messages under 4 MiB, the
// default limit of a gRPC server, so plugins written without the SDK work too.
// With a plugin that announces the shared-memory capability (every plugin built
// with the SDK, on Linux), the Encode and Decode chunks go through memory
// regions shared with the process instead, gRPC carrying only their offsets and
// lengths; the host checks those against its request and copies each result out
// of the region before returning it, so nothing the plugin writes there later
// can change a result (see plugins/README.md). Anything else falls back to gRPC.
//
// [Host.Close] stops every process and waits for it to exit.
package host
