package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Defaults for the zero values of the Spec timeouts.
const (
	DefaultStartTimeout = 10 * time.Second
	DefaultCallTimeout  = 30 * time.Second
	DefaultFitTimeout   = 10 * time.Minute
)

// Spec says which plugin to run.
type Spec struct {
	// Name identifies the process within a Host (e.g. a registered
	// mechanism). Distinct models that must be live at once need distinct names.
	Name string
	// Path is the absolute path of the plugin binary.
	Path string
	// SHA256 is the pinned hex digest of the binary (see Digest).
	SHA256 string
	// Artifact, if not empty, is loaded into the plugin after every start
	// (a model returned by Fit).
	Artifact []byte
	// StartTimeout bounds starting the process and the handshake
	// (DefaultStartTimeout if 0).
	StartTimeout time.Duration
	// CallTimeout bounds every RPC but Fit (DefaultCallTimeout if 0). An RPC
	// that runs past it kills the process.
	CallTimeout time.Duration
	// FitTimeout bounds a whole Fit (DefaultFitTimeout if 0).
	FitTimeout time.Duration
}

// normalise checks s and fills in defaults; it copies Artifact.
func (s Spec) normalise() (Spec, error) {
	if s.Name == "" {
		return s, errors.New("host: Spec.Name is empty")
	}
	if !filepath.IsAbs(s.Path) {
		return s, fmt.Errorf("host: plugin %q: path %q is not absolute", s.Name, s.Path)
	}
	s.Path = filepath.Clean(s.Path)
	s.SHA256 = strings.ToLower(strings.TrimSpace(s.SHA256))
	if b, err := hex.DecodeString(s.SHA256); err != nil || len(b) != sha256.Size {
		return s, fmt.Errorf("host: plugin %q: %q is not a SHA-256 hex digest (64 hex digits)", s.Name, s.SHA256)
	}
	if s.StartTimeout <= 0 {
		s.StartTimeout = DefaultStartTimeout
	}
	if s.CallTimeout <= 0 {
		s.CallTimeout = DefaultCallTimeout
	}
	if s.FitTimeout <= 0 {
		s.FitTimeout = DefaultFitTimeout
	}
	s.Artifact = append([]byte(nil), s.Artifact...)
	return s, nil
}

// key identifies a generation: binary and artifact.
func (s Spec) key() string {
	a := sha256.Sum256(s.Artifact)
	return s.Path + "\x00" + s.SHA256 + "\x00" + hex.EncodeToString(a[:])
}

// Digest returns the lowercase hex SHA-256 digest of the file at path.
func Digest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkExecutable gives a clear error for a path that cannot be a plugin.
func checkExecutable(name, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("host: plugin %q: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("host: plugin %q: %s is not a regular file", name, path)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("host: plugin %q: %s is not executable", name, path)
	}
	return nil
}
