package beam

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs" // gs:// paths
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/s3"  // s3:// paths
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/ldpsql/ldpsql/internal/rowfile"
)

// A job's files are local paths (or paths of a file system every worker mounts), or object-store URLs
// (s3://bucket/key, gs://bucket/object, and any scheme registered with Beam's filesystem package, such
// as memfs:// in tests), which every worker reaches with its own credentials: the AWS SDK's (the
// AWS_* variables, ~/.aws) or Google's application default credentials.
//
// rowfile reads and writes only local files (Parquet goes through DuckDB, which has no object-store
// access without an extension it would download), so a worker copies an object it reads to a local
// temporary file first, and writes an object by writing a local file and uploading it. An object is
// read whole, as one part: a data lake's tables are already split into files. Object stores have no
// rename, so the commit copies each staged object into place and removes it (Beam's
// filesystem.Rename); a job killed during its commit may leave some final objects, but never a
// _SUMMARY.json, which is written last.

// isRemote reports whether p is an object-store URL rather than a local path.
func isRemote(p string) bool { return isURL(p) && !strings.HasPrefix(p, "file://") }

// joinPath is filepath.Join for local paths and a "/" join for URLs (filepath.Join would fold the
// scheme's "//").
func joinPath(dir, name string) string {
	if isRemote(dir) {
		return strings.TrimSuffix(dir, "/") + "/" + name
	}
	return filepath.Join(dir, name)
}

// openStore opens the file system of the URL p. Beam's S3 and GCS file systems panic when their
// client cannot be configured, and the AWS SDK without a region fails every request with "Invalid
// region: region was not a valid DNS name"; both come back as errors that say what to set.
func openStore(ctx context.Context, p string) (fs filesystem.Interface, err error) {
	if strings.HasPrefix(p, "s3://") {
		if err := checkAWSConfig(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			fs, err = nil, fmt.Errorf("%s: opening its object store: %v", p, r)
		}
	}()
	fs, err = filesystem.New(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return fs, nil
}

// checkAWSConfig loads the AWS SDK's configuration as Beam's S3 file system will, and says what is
// wrong with it in the terms a user sets.
func checkAWSConfig(ctx context.Context) error {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("the AWS configuration (AWS_* variables, AWS_PROFILE, ~/.aws) does not load: %w", err)
	}
	if cfg.Region == "" {
		return errors.New("no AWS region is configured: set AWS_REGION (for an S3-compatible store, any region it accepts, with AWS_ENDPOINT_URL_S3), or region in the profile's ~/.aws/config")
	}
	return nil
}

// readFile is os.ReadFile for a local path or a URL.
func readFile(ctx context.Context, p string) ([]byte, error) {
	if !isRemote(p) {
		return os.ReadFile(p)
	}
	fs, err := openStore(ctx, p)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	raw, err := filesystem.Read(ctx, fs, p)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return raw, nil
}

// ReadFile reads a local file or an object (s3://, gs://): what ldpsql etl reads a mechanism file with.
func ReadFile(ctx context.Context, p string) ([]byte, error) { return readFile(ctx, p) }

// writeFile is os.WriteFile for a local path or a URL.
func writeFile(ctx context.Context, p string, data []byte) error {
	if !isRemote(p) {
		return os.WriteFile(p, data, 0o644)
	}
	fs, err := openStore(ctx, p)
	if err != nil {
		return err
	}
	defer fs.Close()
	if err := filesystem.Write(ctx, fs, p, data); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return nil
}

// upload copies the local file local to the URL dest.
func upload(ctx context.Context, local, dest string) error {
	fs, err := openStore(ctx, dest)
	if err != nil {
		return err
	}
	defer fs.Close()
	in, err := os.Open(local)
	if err != nil {
		return err
	}
	defer in.Close()
	w, err := fs.OpenWrite(ctx, dest)
	if err != nil {
		return fmt.Errorf("writing %s: %w", dest, err)
	}
	if _, err := io.Copy(w, in); err != nil {
		w.Close()
		return fmt.Errorf("writing %s: %w", dest, err)
	}
	if err := w.Close(); err != nil { // an object store's upload completes on Close
		return fmt.Errorf("writing %s: %w", dest, err)
	}
	return nil
}

// fetch gives a local copy of the file p: p itself when it is local, or a temporary file holding the
// object (with p's base name, so its format is known), and a function that removes that copy.
func fetch(ctx context.Context, p string) (local string, done func(), err error) {
	if !isRemote(p) {
		return p, func() {}, nil
	}
	fs, err := openStore(ctx, p)
	if err != nil {
		return "", nil, err
	}
	defer fs.Close()
	dir, err := os.MkdirTemp("", "ldpsql-etl-in-")
	if err != nil {
		return "", nil, err
	}
	done = func() { os.RemoveAll(dir) }
	local = filepath.Join(dir, path.Base(p))
	if err := copyObject(ctx, fs, p, local); err != nil {
		done()
		return "", nil, err
	}
	return local, done, nil
}

func copyObject(ctx context.Context, fs filesystem.Interface, p, local string) error {
	r, err := fs.OpenRead(ctx, p)
	if err != nil {
		return fmt.Errorf("reading %s: %w", p, err)
	}
	defer r.Close()
	f, err := os.Create(local)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("reading %s: %w", p, err)
	}
	return f.Close()
}

// moveFile moves a staged file into place: os.Rename, or for a URL Beam's filesystem.Rename (a copy
// and a remove where the store has no rename).
func moveFile(ctx context.Context, from, to string) error {
	if !isRemote(to) {
		return os.Rename(from, to)
	}
	fs, err := openStore(ctx, to)
	if err != nil {
		return err
	}
	defer fs.Close()
	return filesystem.Rename(ctx, fs, from, to)
}

// listDir gives the names of the files directly in dir (for a URL, the objects whose keys are dir/
// and a name without "/"), and no error for a dir that does not exist.
func listDir(ctx context.Context, dir string) ([]string, error) {
	if !isRemote(dir) {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names, err
	}
	fs, err := openStore(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	prefix := strings.TrimSuffix(dir, "/") + "/"
	// Every object under dir, at any depth ("**" is not a pattern every store's List takes, and an
	// object store holds a "directory" only as the prefix of its objects' keys).
	var names []string
	seen := map[string]bool{}
	for _, pattern := range []string{prefix + "*", prefix + "*/*"} {
		objs, err := fs.List(ctx, pattern)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", dir, err)
		}
		for _, o := range objs {
			name, _, _ := strings.Cut(strings.TrimPrefix(o, prefix), "/")
			if name != "" && !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	return names, nil
}

// removeAll is os.RemoveAll; for a URL it removes the objects directly in dir.
func removeAll(ctx context.Context, dir string) error {
	if !isRemote(dir) {
		return os.RemoveAll(dir)
	}
	fs, err := openStore(ctx, dir)
	if err != nil {
		return err
	}
	defer fs.Close()
	rm, ok := fs.(filesystem.Remover)
	if !ok {
		return fmt.Errorf("%s: its file system cannot remove files", dir)
	}
	objs, err := fs.List(ctx, strings.TrimSuffix(dir, "/")+"/*")
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, o := range objs {
		if err := rm.Remove(ctx, o); err != nil {
			return fmt.Errorf("removing %s: %w", o, err)
		}
	}
	return nil
}

// mkdirAll is os.MkdirAll; an object store needs no directories.
func mkdirAll(dir string) error {
	if isRemote(dir) {
		return nil
	}
	return os.MkdirAll(dir, 0o755)
}

// openObject opens the object p for reading from a local copy, which Close removes; errors and Where
// name p, not the copy.
func openObject(p string) (rowfile.Source, error) {
	local, done, err := fetch(context.Background(), p)
	if err != nil {
		return nil, err
	}
	src, err := rowfile.Open(local)
	if err != nil {
		done()
		return nil, errors.New(strings.ReplaceAll(err.Error(), local, p))
	}
	return &objectSource{Source: src, local: local, url: p, done: done}, nil
}

// objectSource is a rowfile.Source of an object's local copy that names the object.
type objectSource struct {
	rowfile.Source
	local, url string
	done       func()
}

func (s *objectSource) Where() string { return strings.Replace(s.Source.Where(), s.local, s.url, 1) }

func (s *objectSource) Next() ([]any, error) {
	cells, err := s.Source.Next()
	if err != nil && err != io.EOF {
		err = errors.New(strings.ReplaceAll(err.Error(), s.local, s.url))
	}
	return cells, err
}

func (s *objectSource) Metadata() ([]byte, string, error) {
	data, from, err := s.Source.Metadata()
	return data, strings.Replace(from, s.local, s.url, 1), err
}

func (s *objectSource) Close() error {
	err := s.Source.Close()
	s.done()
	return err
}

// countMatches counts the objects the URL glob matches.
func countMatches(ctx context.Context, glob string) (int, error) {
	fs, err := openStore(ctx, glob)
	if err != nil {
		return 0, err
	}
	defer fs.Close()
	objs, err := fs.List(ctx, glob)
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", glob, err)
	}
	return len(objs), nil
}
