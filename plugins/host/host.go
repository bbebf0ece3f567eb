package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/ldpsql/ldpsql/plugins/internal/shm"
	"github.com/ldpsql/ldpsql/plugins/proto/ldpv1"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// killGrace is how long a graceful stop may take before the process is killed.
const killGrace = 2 * time.Second

// Host launches and supervises plugin processes. It is safe for concurrent
// use. The zero value is not usable; call New.
type Host struct {
	logger hclog.Logger

	mu      sync.Mutex
	closed  bool
	slots   map[string]*slot
	live    map[*instance]struct{} // every process not yet stopped, current or not
	started []int                  // pids of every process started, for tests

	// noSharedMemory makes every Encode and Decode go over gRPC even with
	// plugins that offer shared memory (tests and benchmarks set it).
	noSharedMemory bool
}

// slot holds the current process for one name; its mutex serialises starts.
type slot struct {
	mu  sync.Mutex
	cur *instance
}

// New returns a Host that logs through logger (nothing if nil), including
// the plugins' own log lines and stderr.
func New(logger hclog.Logger) *Host {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Host{logger: logger, slots: map[string]*slot{}, live: map[*instance]struct{}{}}
}

// Get returns a handle on the plugin spec describes, starting the process if
// none runs for spec.Name, or if the one that runs died, or if it runs another
// binary or artifact (that one is then stopped once its in-flight calls end,
// and its handles fail with ErrReplaced). Starting means: checking the
// binary's digest, the go-plugin handshake, Load(spec.Artifact) if given, and
// Describe, whose answer must be valid and of this protocol version.
func (h *Host) Get(ctx context.Context, spec Spec) (*Plugin, error) {
	spec, err := spec.normalise()
	if err != nil {
		return nil, err
	}
	p := &Plugin{h: h, spec: spec, key: spec.key()}
	inst, err := h.acquire(ctx, p, true)
	if err != nil {
		return nil, err
	}
	p.desc = inst.desc
	inst.release()
	return p, nil
}

// Close stops every plugin process and waits until they have exited. Handles
// then fail with ErrClosed. Close is idempotent.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	slots := make([]*slot, 0, len(h.slots))
	for _, s := range h.slots {
		slots = append(slots, s)
	}
	h.mu.Unlock()

	// Wait for starts in progress (they hold their slot's lock and stop what
	// they started once they see closed), then stop every live process:
	// current ones and replaced or broken ones that calls still hold.
	for _, s := range slots {
		s.mu.Lock()
		s.cur = nil
		s.mu.Unlock()
	}
	h.mu.Lock()
	live := make([]*instance, 0, len(h.live))
	for i := range h.live {
		live = append(live, i)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, i := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i.stop(false)
		}()
	}
	wg.Wait()
	return nil
}

func (h *Host) slot(name string) (*slot, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	s := h.slots[name]
	if s == nil {
		s = &slot{}
		h.slots[name] = s
	}
	return s, nil
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// acquire returns a healthy process for p's generation with a reference
// held; the caller must release it. fromGet allows replacing another
// generation.
func (h *Host) acquire(ctx context.Context, p *Plugin, fromGet bool) (*instance, error) {
	s, err := h.slot(p.spec.Name)
	if err != nil {
		return nil, fmt.Errorf("host: plugin %q: %w", p.spec.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.isClosed() {
		return nil, fmt.Errorf("host: plugin %q: %w", p.spec.Name, ErrClosed)
	}
	if cur := s.cur; cur != nil {
		switch {
		case cur.key != p.key && !fromGet:
			return nil, fmt.Errorf("host: plugin %q: %w by a newer binary or model; call Get again", p.spec.Name, ErrReplaced)
		case cur.key != p.key:
			s.cur = nil
			cur.retire()
		case cur.ref():
			return cur, nil
		default: // dead or broken
			s.cur = nil
			cur.stop(false)
		}
	}
	inst, err := h.start(ctx, p.spec, p.key)
	if err != nil {
		return nil, err
	}
	if !fromGet && !inst.desc.Equal(p.desc) {
		inst.stop(false)
		return nil, fmt.Errorf("host: plugin %q: %w: after a restart it describes itself differently (%+v, was %+v)", p.spec.Name, ErrBadOutput, inst.desc, p.desc)
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		inst.stop(false)
		return nil, fmt.Errorf("host: plugin %q: %w", p.spec.Name, ErrClosed)
	}
	s.cur = inst
	inst.ref()
	return inst, nil
}

// start launches spec's binary and returns it described and loaded.
func (h *Host) start(ctx context.Context, spec Spec, key string) (*instance, error) {
	name := spec.Name
	if err := checkExecutable(name, spec.Path); err != nil {
		return nil, err
	}
	sum, _ := hex.DecodeString(spec.SHA256)

	cmd := exec.Command(spec.Path)
	if t := os.Getenv("TMPDIR"); t != "" {
		cmd.Env = []string{"TMPDIR=" + t}
	}
	setProcAttr(cmd)
	tail := &tailWriter{max: 16 << 10}
	logger := h.logger.Named(name)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		Plugins:          plugin.PluginSet{sdk.PluginName: clientPlugin{}},
		Cmd:              cmd,
		SecureConfig:     &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  dialOptions,
		SkipHostEnv:      true,
		StartTimeout:     spec.StartTimeout,
		Logger:           logger,
		Stderr:           tail,                             // the process's own stderr (fd 2)
		SyncStderr:       &syncLog{tail, logger, "stderr"}, // os.Stderr, forwarded over gRPC
		SyncStdout:       &syncLog{tail, logger, "stdout"},
	})
	inst := &instance{h: h, name: name, key: key, spec: spec, client: client, cmd: cmd, stderr: tail}
	h.mu.Lock()
	h.live[inst] = struct{}{}
	h.mu.Unlock()

	rpcClient, err := client.Client()
	if cmd.Process != nil {
		inst.pid = cmd.Process.Pid
		h.mu.Lock()
		h.started = append(h.started, inst.pid)
		h.mu.Unlock()
	}
	if err != nil {
		inst.stop(false)
		if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
			got, derr := Digest(spec.Path)
			if derr != nil {
				got = "unknown (" + derr.Error() + ")"
			}
			return nil, &DigestMismatchError{Name: name, Path: spec.Path, Want: spec.SHA256, Got: got}
		}
		return nil, fmt.Errorf("host: plugin %q: %w: %s did not start as an ldpsql encoder plugin (protocol %d): %v%s",
			name, ErrHandshake, spec.Path, sdk.ProtocolVersion, err, inst.stderrNote())
	}
	raw, err := rpcClient.Dispense(sdk.PluginName)
	if err != nil {
		inst.stop(false)
		return nil, fmt.Errorf("host: plugin %q: %w: %v", name, ErrHandshake, err)
	}
	enc, ok := raw.(*pluginConn)
	if !ok {
		inst.stop(false)
		return nil, fmt.Errorf("host: plugin %q: %w: dispensed %T", name, ErrHandshake, raw)
	}
	inst.rpc = enc

	if len(spec.Artifact) > 0 {
		cctx, cancel := context.WithTimeout(ctx, spec.CallTimeout)
		_, err := enc.Load(cctx, &ldpv1.LoadRequest{Artifact: spec.Artifact})
		cancel()
		if err != nil {
			inst.stop(true)
			return nil, fmt.Errorf("host: plugin %q: loading its %d-byte model artifact: %s", name, len(spec.Artifact), statusText(err))
		}
	}
	cctx, cancel := context.WithTimeout(ctx, spec.CallTimeout)
	pd, err := enc.Describe(cctx, &ldpv1.DescribeRequest{})
	cancel()
	if err != nil {
		inst.stop(true)
		return nil, fmt.Errorf("host: plugin %q: Describe: %s%s", name, statusText(err), inst.stderrNote())
	}
	desc, err := sdk.DescriptionFromProto(pd)
	if err != nil {
		inst.stop(true)
		return nil, fmt.Errorf("host: plugin %q: %w: invalid description: %v", name, ErrBadOutput, err)
	}
	if desc.ProtocolVersion != sdk.ProtocolVersion {
		inst.stop(true)
		return nil, fmt.Errorf("host: plugin %q: %w: it speaks protocol version %d, the host %d", name, ErrHandshake, desc.ProtocolVersion, sdk.ProtocolVersion)
	}
	inst.desc = desc
	if shm.Supported && !h.noSharedMemory && hasSharedMemory(pd) {
		enc.shm = newShmPool(enc.EncoderClient, name, logger)
	}
	h.logger.Debug("plugin started", "name", name, "pid", inst.pid, "encoder", desc.Name, "version", desc.Version, "shared_memory", enc.shm != nil)
	return inst, nil
}

// instance is one plugin process.
type instance struct {
	h         *Host
	name, key string
	spec      Spec
	client    *plugin.Client
	cmd       *exec.Cmd
	rpc       *pluginConn
	desc      sdk.Description
	pid       int
	stderr    *tailWriter

	mu      sync.Mutex
	refs    int
	retired bool
	broken  bool
	once    sync.Once
}

// ref takes a reference if the process is usable.
func (i *instance) ref() bool {
	if i.client.Exited() {
		return false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.broken || i.retired {
		return false
	}
	i.refs++
	return true
}

func (i *instance) release() {
	i.mu.Lock()
	i.refs--
	stop := i.retired && i.refs == 0
	i.mu.Unlock()
	if stop {
		i.stop(false)
	}
}

// retire stops the process once its in-flight calls are done.
func (i *instance) retire() {
	i.mu.Lock()
	i.retired = true
	stop := i.refs == 0
	i.mu.Unlock()
	if stop {
		i.stop(false)
	}
}

// markBroken stops the process from being handed out again.
func (i *instance) markBroken() {
	i.mu.Lock()
	i.broken = true
	i.mu.Unlock()
}

// stop ends the process and waits for it (and its stderr) to finish. With
// hard it is killed at once; otherwise it is asked to shut down and killed
// after killGrace. Safe to call more than once.
func (i *instance) stop(hard bool) {
	i.once.Do(func() {
		if hard {
			i.kill()
		}
		done := make(chan struct{})
		go func() {
			i.client.Kill()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(killGrace):
			i.kill()
			<-done
		}
		if i.rpc != nil && i.rpc.shm != nil {
			i.rpc.shm.close() // the process is gone: unmap its regions
		}
		i.h.mu.Lock()
		delete(i.h.live, i)
		i.h.mu.Unlock()
	})
}

func (i *instance) kill() {
	if i.cmd.Process != nil {
		_ = i.cmd.Process.Kill() // os.Process is safe against pid reuse
	}
}

// stderrNote returns the end of the process's stderr, for error messages.
func (i *instance) stderrNote() string {
	var keep []string
	for _, line := range strings.Split(i.stderr.String(), "\n") {
		// go-plugin's own debug chatter (JSON hclog lines) says nothing useful.
		if strings.HasPrefix(line, `{"@level":"debug"`) || strings.HasPrefix(line, `{"@level":"trace"`) {
			continue
		}
		keep = append(keep, line)
	}
	s := strings.TrimSpace(strings.Join(keep, "\n"))
	if s == "" {
		return ""
	}
	const max = 2000
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return "\nplugin stderr (end):\n" + s
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// syncLog receives what a plugin writes to os.Stdout and os.Stderr (which
// go-plugin forwards over gRPC): it keeps it for error messages and logs it.
type syncLog struct {
	tail   *tailWriter
	logger hclog.Logger
	stream string
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.tail.Write(p)
	s.logger.Debug(strings.TrimRight(string(p), "\n"), "stream", s.stream)
	return len(p), nil
}
