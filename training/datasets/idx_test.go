package datasets

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func idxBytes(magicType byte, dims []uint32, data []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, magicType, byte(len(dims))})
	for _, d := range dims {
		b.Write([]byte{byte(d >> 24), byte(d >> 16), byte(d >> 8), byte(d)})
	}
	b.Write(data)
	return b.Bytes()
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func TestReadIDX(t *testing.T) {
	raw := idxBytes(0x08, []uint32{2, 3}, []byte{1, 2, 3, 4, 5, 6})
	for _, in := range [][]byte{raw, gz(raw)} {
		x, err := ReadIDX(bytes.NewReader(in))
		if err != nil || len(x.Dims) != 2 || x.Dims[1] != 3 || x.Data[5] != 6 {
			t.Fatalf("%v %v", x, err)
		}
	}
	for _, bad := range [][]byte{
		{1, 0, 8, 1},
		idxBytes(0x0D, []uint32{1}, []byte{0, 0, 0, 0}),
		idxBytes(0x08, []uint32{4}, []byte{1, 2}),
		idxBytes(0x08, []uint32{0}, nil),
	} {
		if _, err := ReadIDX(bytes.NewReader(bad)); err == nil {
			t.Errorf("no error for % x", bad)
		}
	}
}

func TestLoadFashionMNISTSearchAndErrors(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LDPSQL_DATA", dir)
	_, _, err := LoadFashionMNIST("test")
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "/usr/share/datasets/fashion-mnist") ||
		!strings.Contains(err.Error(), "shared/data/fashion-mnist") {
		if _, statErr := os.Stat("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"); statErr != nil {
			t.Fatalf("error should name all three places: %v", err)
		}
	}
	// A tiny fake split in $LDPSQL_DATA/fashion-mnist is found (unless the Debian package is installed).
	sub := filepath.Join(dir, "fashion-mnist")
	os.MkdirAll(sub, 0o755)
	os.WriteFile(filepath.Join(sub, "t10k-images-idx3-ubyte.gz"), gz(idxBytes(0x08, []uint32{2, 2, 2}, []byte{0, 255, 51, 0, 0, 0, 0, 255})), 0o644)
	os.WriteFile(filepath.Join(sub, "t10k-labels-idx1-ubyte"), idxBytes(0x08, []uint32{2}, []byte{3, 9}), 0o644)
	imgs, from, err := LoadFashionMNIST("test")
	if err != nil {
		t.Fatal(err)
	}
	if from == sub && (len(imgs.Pixels) != 2 || imgs.Pixels[0][1] != 1 || imgs.Pixels[0][2] != 0.2 || imgs.Labels[1] != 9) {
		t.Fatalf("%+v", imgs)
	}
	if _, _, err := LoadFashionMNIST("validation"); err == nil {
		t.Fatal("bad split accepted")
	}
}

// The real data, when the project's shared copy is beside the repository.
func TestLoadFashionMNISTShared(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "data")
	if _, err := os.Stat(filepath.Join(dir, "fashion-mnist", "t10k-images-idx3-ubyte.gz")); err != nil {
		t.Skip("no shared Fashion-MNIST beside the repository")
	}
	t.Setenv("LDPSQL_DATA", dir)
	imgs, _, err := LoadFashionMNIST("test")
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs.Pixels) != 10000 || len(imgs.Pixels[0]) != 784 || imgs.Labels[0] != 9 {
		t.Fatalf("%d images of %d pixels, first label %d", len(imgs.Pixels), len(imgs.Pixels[0]), imgs.Labels[0])
	}
}
