package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ldpsql/ldpsql/plugins/internal/shm"
	"github.com/ldpsql/ldpsql/plugins/internal/wirecodec"
	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// MaxChunkBytes bounds the float32 payload of one Encode, Decode or Fit
// message: 64 KiB under gRPC's default 4 MiB limit.
const MaxChunkBytes = 4<<20 - 64<<10

// Plugin is a handle on one generation of a named plugin (see Host.Get). It is
// safe for concurrent use.
type Plugin struct {
	h    *Host
	spec Spec
	key  string
	desc sdk.Description
}

// Name returns Spec.Name.
func (p *Plugin) Name() string { return p.spec.Name }

// Describe returns what the plugin declared when this handle was made: it
// does not change while the handle is valid. It starts the process again if
// it died.
func (p *Plugin) Describe(ctx context.Context) (sdk.Description, error) {
	inst, err := p.h.acquire(ctx, p, false)
	if err != nil {
		return sdk.Description{}, err
	}
	inst.release()
	return p.desc, nil
}

// Encode maps rows (each of InputDim values) to as many rows of OutputDim
// values, in one RPC per chunk of under MaxChunkBytes. The values are the
// plugin's, unchecked: they may be NaN or outside the declared output set.
func (p *Plugin) Encode(ctx context.Context, rows [][]float32) ([][]float32, error) {
	if !p.desc.Ready() {
		return nil, fmt.Errorf("host: plugin %q: Encode: %w (it declares no output set); fit it and pass the artifact in Spec.Artifact", p.spec.Name, ErrNoModel)
	}
	return p.transform(ctx, "Encode", rows, p.desc.InputDim, p.desc.OutputDim, (*pluginConn).encode)
}

// Decode maps latents (each of OutputDim values) back to input space
// (InputDim values), if the plugin has a decoder.
func (p *Plugin) Decode(ctx context.Context, latents [][]float32) ([][]float32, error) {
	if !p.desc.HasDecoder {
		return nil, fmt.Errorf("host: plugin %q: Decode: %w (it has no decoder)", p.spec.Name, ErrUnsupported)
	}
	if !p.desc.Ready() {
		return nil, fmt.Errorf("host: plugin %q: Decode: %w", p.spec.Name, ErrNoModel)
	}
	return p.transform(ctx, "Decode", latents, p.desc.OutputDim, p.desc.InputDim, (*pluginConn).decode)
}

// matrixRPC sends rows of cols values and returns the answer.
type matrixRPC func(c *pluginConn, ctx context.Context, rows [][]float32, cols int) (*ldpv1.Matrix, error)

func (p *Plugin) transform(ctx context.Context, op string, rows [][]float32, inCols, outCols int, rpc matrixRPC) ([][]float32, error) {
	for i, r := range rows {
		if len(r) != inCols {
			return nil, fmt.Errorf("host: plugin %q: %s: row %d has %d values, the plugin takes %d", p.spec.Name, op, i, len(r), inCols)
		}
	}
	step, nchunks := chunking(len(rows), inCols, outCols)
	results := make([][][]float32, nchunks)
	errs := make([]error, nchunks)
	do := func(c int) {
		first := c * step
		chunk := rows[first:min(first+step, len(rows))]
		var (
			res      *ldpv1.Matrix // over gRPC
			shared   [][]float32   // through shared memory, copied out
			viaShm   bool
			bad      error // a shared-memory answer that does not fit the request
			inputErr error // a non-finite input value: nothing was sent
		)
		// Plugins get finite values only. Through shared memory each row is checked as it is copied
		// into the region, while it is in cache; over gRPC, before the codec packs the chunk.
		checkRow := func(i int, row []float32) error {
			if j := FirstNonFinite(row); j >= 0 {
				inputErr = &NonFiniteInputError{Row: first + i, Index: j, Value: row[j]}
			}
			return inputErr
		}
		err := p.call(ctx, op, p.spec.CallTimeout, func(ctx context.Context, c *pluginConn) (err error) {
			if c.shm != nil {
				need := shm.AlignUp(4*uint64(len(chunk))*uint64(inCols)) + 4*uint64(len(chunk))*uint64(outCols)
				r, err := c.shm.get(ctx, need)
				if err != nil {
					return err
				}
				if r != nil {
					viaShm = true
					shared, bad, err = c.shm.shared(ctx, op == "Decode", r, chunk, inCols, outCols, checkRow)
					if inputErr != nil {
						return nil // the plugin is not at fault; reported below
					}
					return err
				}
			}
			if inputErr = checkRowsFinite(chunk, first); inputErr != nil {
				return nil
			}
			res, err = rpc(c, ctx, chunk, inCols) // the codec packs chunk into the request
			return err
		})
		switch {
		case inputErr != nil:
			errs[c] = fmt.Errorf("host: plugin %q: %s: %w", p.spec.Name, op, inputErr)
			return
		case err != nil:
			errs[c] = err
			return
		case bad != nil:
			errs[c] = fmt.Errorf("host: plugin %q: %s: %w: %v", p.spec.Name, op, ErrBadOutput, bad)
			return
		case viaShm:
			results[c] = shared // shape checked against the request
			return
		}
		got, err := res.RowViews()
		if err != nil {
			errs[c] = fmt.Errorf("host: plugin %q: %s: %w: %v", p.spec.Name, op, ErrBadOutput, err)
			return
		}
		if len(got) != len(chunk) || (len(got) > 0 && int(res.GetCols()) != outCols) {
			errs[c] = fmt.Errorf("host: plugin %q: %s: %w: %d rows of %d values for %d rows, want %d values each",
				p.spec.Name, op, ErrBadOutput, len(got), res.GetCols(), len(chunk), outCols)
			return
		}
		results[c] = got
	}
	if nchunks <= 1 {
		if nchunks == 1 {
			do(0)
		}
	} else {
		// Keep maxInFlight chunks in flight, so that packing, TLS and the
		// plugin's work overlap. A failure stops further chunks.
		var (
			wg     sync.WaitGroup
			next   atomic.Int64
			failed atomic.Bool
		)
		for range min(maxInFlight, nchunks) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !failed.Load() {
					c := int(next.Add(1) - 1)
					if c >= nchunks {
						return
					}
					if do(c); errs[c] != nil {
						failed.Store(true)
					}
				}
			}()
		}
		wg.Wait()
	}
	out := make([][]float32, 0, len(rows))
	for c := range results {
		if errs[c] != nil {
			return nil, errs[c]
		}
		out = append(out, results[c]...)
	}
	return out, nil
}

// maxInFlight is the number of chunks of one Encode or Decode sent at once.
// With 4, a batch of 4,096 rows of 784 values goes out whole and the plugin
// encodes it all at once (fewer pauses between sending and encoding than
// with 2), and 4 messages under 4 MiB fit in the SDK's 16 MiB connection
// window.
const maxInFlight = 4

// chunkRows is the largest number of rows per message.
func chunkRows(inCols, outCols int) int {
	return max(1, MaxChunkBytes/(4*max(inCols, outCols, 1)))
}

// chunking splits n rows into nchunks messages of step rows (the last one
// possibly shorter) under MaxChunkBytes, of about equal size so that the
// chunks in flight finish together.
func chunking(n, inCols, outCols int) (step, nchunks int) {
	if n == 0 {
		return 1, 0
	}
	step = chunkRows(inCols, outCols)
	nchunks = (n + step - 1) / step
	step = (n + nchunks - 1) / nchunks
	return step, (n + step - 1) / step
}

// Fit streams rows to the plugin's Fit and returns the model artifact, which
// a later Get can load through Spec.Artifact. params is a JSON value (nil for
// none). next returns successive batches of rows of inputDim values and
// io.EOF after the last one. Fit does not change the running model. The
// whole call is bounded by Spec.FitTimeout.
func (p *Plugin) Fit(ctx context.Context, params json.RawMessage, inputDim int, next func() ([][]float32, error)) ([]byte, error) {
	if !p.desc.CanFit {
		return nil, fmt.Errorf("host: plugin %q: Fit: %w (it cannot fit)", p.spec.Name, ErrUnsupported)
	}
	if inputDim <= 0 || inputDim > sdk.MaxDim {
		return nil, fmt.Errorf("host: plugin %q: Fit: input dimension %d out of range [1, %d]", p.spec.Name, inputDim, sdk.MaxDim)
	}
	if len(params) > 0 && !json.Valid(params) {
		return nil, fmt.Errorf("host: plugin %q: Fit: params are not valid JSON: %q", p.spec.Name, params)
	}
	var artifact []byte
	var readErr error
	step := chunkRows(inputDim, 0)
	err := p.call(ctx, "Fit", p.spec.FitTimeout, func(ctx context.Context, c *pluginConn) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.Fit(ctx)
		if err != nil {
			return err
		}
		// send takes a *ldpv1.FitRequest or a batch as *wirecodec.Rows.
		send := func(m any) (open bool, err error) {
			if err := stream.SendMsg(m); err != nil {
				if errors.Is(err, io.EOF) { // the plugin ended the call; CloseAndRecv says why
					return false, nil
				}
				return false, err
			}
			return true, nil
		}
		open, err := send(&ldpv1.FitRequest{Msg: &ldpv1.FitRequest_Params{Params: &ldpv1.FitParams{ParamsJson: params, InputDim: uint32(inputDim)}}})
		for open && err == nil {
			var batch [][]float32
			batch, readErr = next()
			if errors.Is(readErr, io.EOF) {
				readErr = nil
				break
			}
			if readErr == nil {
				for i, r := range batch {
					if len(r) != inputDim {
						readErr = fmt.Errorf("a row (%d of its batch) has %d values, want %d", i, len(r), inputDim)
						break
					}
				}
			}
			if readErr != nil {
				return nil // cancel() aborts the stream
			}
			for lo := 0; lo < len(batch) && open && err == nil; lo += step {
				open, err = send(&wirecodec.Rows{Field: 2, Rows: batch[lo:min(lo+step, len(batch))], Cols: inputDim})
			}
		}
		if err != nil {
			return err
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			return err
		}
		artifact = resp.GetArtifact()
		return nil
	})
	if readErr != nil {
		return nil, fmt.Errorf("host: plugin %q: Fit: reading rows: %w", p.spec.Name, readErr)
	}
	if err != nil {
		return nil, err
	}
	return artifact, nil
}

// call runs f on a healthy process with a timeout and turns its error into
// one that says what happened to the process.
func (p *Plugin) call(ctx context.Context, op string, timeout time.Duration, f func(context.Context, *pluginConn) error) error {
	inst, err := p.h.acquire(ctx, p, false)
	if err != nil {
		return err
	}
	defer inst.release()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = f(cctx, inst.rpc)
	if err == nil {
		return nil
	}
	code := status.Code(err)
	// gRPC can report a deadline (status DeadlineExceeded, or a CANCEL reset carrying it) a moment
	// before the context's own timer fires, so whose deadline it was is decided by comparing them:
	// the caller's (it gave up; the plugin is fine) or the call timeout's (the plugin hung).
	deadlineHit := errors.Is(cctx.Err(), context.DeadlineExceeded) || code == codes.DeadlineExceeded
	callerDeadline := false
	if cd, ok := ctx.Deadline(); ok && deadlineHit {
		if d, _ := cctx.Deadline(); !cd.After(d) {
			callerDeadline = true
		}
	}
	switch {
	case p.h.isClosed():
		return fmt.Errorf("host: plugin %q: %s: %w", p.spec.Name, op, ErrClosed)
	case callerDeadline:
		return fmt.Errorf("host: plugin %q: %s: %w", p.spec.Name, op, context.DeadlineExceeded)
	case ctx.Err() != nil: // the caller gave up
		return fmt.Errorf("host: plugin %q: %s: %w", p.spec.Name, op, ctx.Err())
	case deadlineHit:
		inst.markBroken()
		inst.stop(true)
		return fmt.Errorf("host: plugin %q (pid %d): %s: %w after %v; the process was killed and the next call starts it again%s",
			p.spec.Name, inst.pid, op, ErrTimeout, timeout, inst.stderrNote())
	case code == codes.Unavailable || code == codes.Canceled || inst.client.Exited():
		inst.markBroken()
		inst.stop(false)
		return fmt.Errorf("host: plugin %q (pid %d): %s: %w (%s); the next call starts it again%s",
			p.spec.Name, inst.pid, op, ErrCrashed, statusText(err), inst.stderrNote())
	case code == codes.Unimplemented:
		return fmt.Errorf("host: plugin %q: %s: %w: %s", p.spec.Name, op, ErrUnsupported, statusText(err))
	}
	return fmt.Errorf("host: plugin %q: %s: %s", p.spec.Name, op, statusText(err))
}

// statusText is the message of a gRPC status error, with its code.
func statusText(err error) string {
	if s, ok := status.FromError(err); ok {
		return fmt.Sprintf("%s (%s)", s.Message(), s.Code())
	}
	return err.Error()
}
