package integration

import (
	"encoding/json"
	"html"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/client"
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/training/datasets"
)

// chromium returns the headless browser the WebAssembly test runs in (scripts/test.sh installs Debian's
// chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no headless browser: scripts/test.sh installs chromium")
	}
	t.Skip("chromium not installed (apt-get install chromium)")
	return ""
}

var outRE = regexp.MustCompile(`(?s)<pre id="out">(.*?)</pre>`)

// The browser client: client/wasm built for GOOS=js GOARCH=wasm, the example page served over HTTP,
// run in a real headless Chromium. The page loads a PCA mechanism file and 40 WDBC rows, privatises
// them in the browser at ε = 50 and shows the releases: 40 of 4 values each, around the clean encodings
// (the Laplace noise has scale 2l/ε, so every release lies within 20 scales of its encoding — and far
// from another row's). A tampered mechanism file is refused in the page too.
func TestPrivatiseInTheBrowser(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "client.wasm"), "./client/wasm")
	build.Dir = ".."
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the wasm client: %v\n%s", err, out)
	}
	for _, c := range [][2]string{
		{filepath.Join(runtime.GOROOT(), "lib", "wasm", "wasm_exec.js"), "wasm_exec.js"},
		{filepath.Join("..", "examples", "browser", "index.html"), "index.html"},
	} {
		b, err := os.ReadFile(c[0])
		if err != nil {
			b, err = os.ReadFile(filepath.Join(runtime.GOROOT(), "misc", "wasm", "wasm_exec.js"))
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c[1]), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := datasets.LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]float32, 40)
	var fit [][]float32
	for i, f := range w.Features {
		x := make([]float32, 30)
		for j := range x {
			x[j] = float32(f[j])
		}
		if i < 40 {
			rows[i] = x
		}
		fit = append(fit, x)
	}
	m, err := pcaenc.FitRows(pcaenc.Params{D: 4, L: 2000}, fit)
	if err != nil {
		t.Fatal(err)
	}
	art, _ := m.Artifact()
	file, err := client.Marshal(client.File{Name: "pca4", Plugin: "pca", InputDim: 30, OutputDim: 4, Set: client.Set{Kind: "l1_ball", Radius: 2000},
		Artifact: art, ExportedAt: time.Unix(0, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	rowsJSON, _ := json.Marshal(rows)
	_ = os.WriteFile(filepath.Join(dir, "mechanism.ldpm"), file, 0o644)
	_ = os.WriteFile(filepath.Join(dir, "tampered.ldpm"), []byte(strings.Replace(string(file), `"radius": 2000`, `"radius": 20`, 1)), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "rows.json"), rowsJSON, 0o644)
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(dir)))
	srv := httptest.NewServer(mux) // serves client.wasm as application/wasm
	defer srv.Close()

	page := func(query string) string {
		t.Helper()
		cmd := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--user-data-dir="+filepath.Join(dir, "profile"), "--virtual-time-budget=60000", "--dump-dom", srv.URL+"/index.html"+query)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, out)
		}
		mm := outRE.FindStringSubmatch(string(out))
		if mm == nil {
			t.Fatalf("no output on the page:\n%s", out)
		}
		return html.UnescapeString(mm[1])
	}
	var got struct {
		Mechanism string
		Releases  [][]float64
		Error     string
	}
	text := page("?eps=50")
	if err := json.Unmarshal([]byte(text), &got); err != nil || got.Error != "" || len(got.Releases) != 40 {
		t.Fatalf("page output %q: %v", text, err)
	}
	clean, err := m.Encode(rows)
	if err != nil {
		t.Fatal(err)
	}
	b := 2 * 2000 / 50.0
	for i, r := range got.Releases {
		if len(r) != 4 {
			t.Fatalf("release %d has %d values", i, len(r))
		}
		for k, v := range r {
			if math.Abs(v-float64(clean[i][k])) > 20*b {
				t.Fatalf("release %d: %v, clean %v (noise scale %v)", i, r, clean[i], b)
			}
		}
	}
	if text := page("?eps=50&mechanism=tampered.ldpm"); !strings.Contains(text, "SHA-256 does not match") {
		t.Fatalf("a tampered file in the page: %s", text)
	}
}
