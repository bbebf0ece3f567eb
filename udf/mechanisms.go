package udf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/ldpsql/ldpsql/engine"
	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/host"
	"github.com/ldpsql/ldpsql/plugins/sdk"
)

// Mechanisms joins the three parts of an LDP mechanism for the SQL functions: the catalog record (which
// plugin binary, pinned by digest, with which model), the plugin process (the untrusted encoder) and the
// randomiser (trusted host code in package mechanisms, which clips every encoding into the set recorded
// at registration and adds the noise).
type Mechanisms struct {
	catalog     *engine.Catalog
	host        *host.Host
	callTimeout time.Duration
	warn        func(format string, args ...any) // the server log

	mu       sync.Mutex
	resolved map[string]*resolvedMechanism
}

// resolvedMechanism is a registered mechanism ready to encode.
type resolvedMechanism struct {
	record engine.Mechanism
	desc   sdk.Description // as recorded at registration: the set the host enforces
	set    mechanisms.OutputSet
	plugin *host.Plugin
	warn   func(format string, args ...any)

	randMu        sync.Mutex
	randomisers   map[randKey]mechanisms.VectorRandomiser
	caveatsLogged map[randKey]bool // randomisers whose caveat (warnCaveat) is in the server log
}

type randKey struct {
	name string
	eps  float64
}

func newMechanisms(catalog *engine.Catalog, h *host.Host) *Mechanisms {
	return &Mechanisms{catalog: catalog, host: h, resolved: map[string]*resolvedMechanism{}}
}

// forget drops the cached state of a mechanism after it is registered again, refitted or dropped.
func (m *Mechanisms) forget(name string) {
	m.mu.Lock()
	delete(m.resolved, name)
	m.mu.Unlock()
}

// resolve returns the mechanism called name with its plugin started (or reused).
func (m *Mechanisms) resolve(ctx context.Context, name string) (*resolvedMechanism, error) {
	m.mu.Lock()
	r, ok := m.resolved[name]
	m.mu.Unlock()
	if ok {
		return r, nil
	}
	rec, err := m.catalog.Mechanism(ctx, name)
	if err != nil {
		if errors.Is(err, engine.ErrNoMechanism) {
			return nil, fmt.Errorf("unknown mechanism %q (SELECT name FROM ldpsql_catalog.ldp_mechanisms lists them)", name)
		}
		return nil, err
	}
	var desc sdk.Description
	if err := json.Unmarshal(rec.Description, &desc); err != nil {
		return nil, fmt.Errorf("mechanism %q: recorded description: %w", name, err)
	}
	if !desc.Ready() {
		return nil, fmt.Errorf("mechanism %q has no fitted model: fit one with CALL ldp_fit_mechanism('new_name', '%s', 'aux_table', 'features_col', '{...}')", name, name)
	}
	spec := host.Spec{Name: "mechanism:" + name, Path: rec.Path, SHA256: rec.SHA256, CallTimeout: m.callTimeout}
	if rec.Model != "" {
		model, err := m.catalog.Model(ctx, rec.Model)
		if err != nil {
			return nil, fmt.Errorf("mechanism %q: %w", name, err)
		}
		spec.Artifact = model.Artifact
	}
	p, err := m.host.Get(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("mechanism %q: %w", name, err)
	}
	live, err := p.Describe(ctx)
	if err != nil {
		return nil, fmt.Errorf("mechanism %q: %w", name, err)
	}
	// The recorded set is what the host enforces; a plugin that now describes another one is refused
	// rather than trusted.
	if live.InputDim != desc.InputDim || live.OutputDim != desc.OutputDim {
		return nil, fmt.Errorf("mechanism %q: the plugin now declares dimensions %d -> %d, registered as %d -> %d; register it again",
			name, live.InputDim, live.OutputDim, desc.InputDim, desc.OutputDim)
	}
	set, err := outputSet(desc)
	if err != nil {
		return nil, fmt.Errorf("mechanism %q: %w", name, err)
	}
	r = &resolvedMechanism{record: rec, desc: desc, set: set, plugin: p, warn: m.warn, randomisers: map[randKey]mechanisms.VectorRandomiser{}}
	m.mu.Lock()
	m.resolved[name] = r
	m.mu.Unlock()
	return r, nil
}

// outputSet converts a recorded output set to the randomisers' type.
func outputSet(d sdk.Description) (mechanisms.OutputSet, error) {
	if set, ok := d.RandomiserSet(); ok {
		return set, nil
	}
	return nil, fmt.Errorf("encoder %q declares no output set", d.Name)
}

// randomiser returns the randomiser name at eps for this mechanism's recorded output set.
func (r *resolvedMechanism) randomiser(name string, eps float64) (mechanisms.VectorRandomiser, error) {
	r.randMu.Lock()
	defer r.randMu.Unlock()
	key := randKey{name, eps}
	if rnd, ok := r.randomisers[key]; ok {
		return rnd, nil
	}
	set, err := outputSet(r.desc)
	if err != nil {
		return nil, err
	}
	rnd, err := mechanisms.NewRandomiser(name, set, eps)
	if err != nil {
		return nil, err
	}
	r.randomisers[key] = rnd
	return rnd, nil
}

// warnPoorRandomiser is the code of the warning that a randomiser releases a mechanism's output set with
// far more noise than another would (MySQL's ER_UNKNOWN_ERROR, which carries text of its own).
const warnPoorRandomiser = 1105

// caveatMu serialises warnCaveat's read and append of a session's warnings, which GMS does not lock.
var caveatMu sync.Mutex

// warnCaveat adds to the statement's warnings, once, mechanisms.RandomiserCaveat's sentence for randomiser
// on this mechanism's output set at eps (text from RandomiserCaveatAnyEpsilon when eps is 0), and logs it
// once per randomiser and ε in the server log. The release is made all the same: it is eps-LDP whatever
// the randomiser; the caveat is about utility.
func (r *resolvedMechanism) warnCaveat(ctx *sql.Context, randomiser string, eps float64) {
	var msg string
	if eps == 0 {
		msg = mechanisms.RandomiserCaveatAnyEpsilon(randomiser, r.set)
	} else {
		msg = mechanisms.RandomiserCaveat(randomiser, r.set, eps)
	}
	if msg == "" {
		return
	}
	msg = fmt.Sprintf("mechanism %q: %s", r.record.Name, msg)
	r.randMu.Lock()
	if r.caveatsLogged == nil {
		r.caveatsLogged = map[randKey]bool{}
	}
	first := !r.caveatsLogged[randKey{randomiser, eps}]
	r.caveatsLogged[randKey{randomiser, eps}] = true
	r.randMu.Unlock()
	if first && r.warn != nil {
		r.warn("%s", msg)
	}
	warnOnce(ctx, warnPoorRandomiser, msg)
}

// warnOnce adds a warning with msg to the statement's warnings unless one is there already.
func warnOnce(ctx *sql.Context, code int, msg string) {
	if ctx == nil || ctx.Session == nil {
		return
	}
	caveatMu.Lock()
	defer caveatMu.Unlock()
	for _, w := range ctx.Session.Warnings() {
		if w.Message == msg {
			return
		}
	}
	ctx.Session.Warn(&sql.Warning{Level: "Warning", Code: code, Message: msg})
}

// encode runs the plugin on rows (each of the input dimension) and checks the shape of its answer.
func (r *resolvedMechanism) encode(ctx context.Context, rows [][]float32) ([][]float32, error) {
	out, err := r.plugin.Encode(ctx, rows)
	if errors.Is(err, host.ErrReplaced) {
		return nil, fmt.Errorf("mechanism %q was replaced while in use; run the statement again: %w", r.record.Name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("mechanism %q: %w", r.record.Name, err)
	}
	if len(out) != len(rows) {
		return nil, fmt.Errorf("mechanism %q returned %d encodings for %d rows", r.record.Name, len(out), len(rows))
	}
	return out, nil
}

// privatise encodes rows and releases each encoding through the randomiser, which first clips it into
// the recorded output set: whatever the plugin returned, the release is eps-LDP.
func (r *resolvedMechanism) privatise(ctx context.Context, rows [][]float32, randomiser string, eps float64) ([][]float64, error) {
	rnd, err := r.randomiser(randomiser, eps)
	if err != nil {
		return nil, err
	}
	enc, err := r.encode(ctx, rows)
	if err != nil {
		return nil, err
	}
	src := mechanisms.NewCryptoSource() // one per batch: batches are randomised concurrently
	out := make([][]float64, len(enc))
	x := make([]float64, r.desc.OutputDim)
	var faulty int
	for i, z := range enc {
		var ok bool
		if out[i], ok, err = mechanisms.ReleaseEncoding(rnd, z, x, src); err != nil {
			return nil, fmt.Errorf("mechanism %q: %w", r.record.Name, err)
		}
		if !ok {
			faulty++ // released from the set's centre (mechanisms.ReleaseEncoding); the DBA is told below
		}
	}
	if faulty > 0 && r.warn != nil {
		r.warn("mechanism %q: the plugin returned %d non-finite or wrong-length encodings in a batch of %d; those rows were released from the output set's centre (the plugin is faulty)", r.record.Name, faulty, len(enc))
	}
	return out, nil
}
