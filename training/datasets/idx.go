package datasets

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// IDX is the MNIST file format: a magic number (two zero bytes, the element type, the number of
// dimensions), the dimensions as big-endian uint32, then the elements in row-major order. ReadIDX
// reads files of unsigned bytes (type 0x08), gzipped or not.

// IDX holds an unsigned-byte IDX array.
type IDX struct {
	Dims []int
	Data []byte
}

// ReadIDX parses an IDX array of unsigned bytes; r may be gzip-compressed.
func ReadIDX(r io.Reader) (*IDX, error) {
	br := bufio.NewReader(r)
	if head, err := br.Peek(2); err == nil && head[0] == 0x1f && head[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("IDX: gzip: %w", err)
		}
		defer gz.Close()
		br = bufio.NewReader(gz)
	}
	var magic [4]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, fmt.Errorf("IDX: reading the magic number: %w", err)
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, fmt.Errorf("IDX: bad magic number % x", magic)
	}
	if magic[2] != 0x08 {
		return nil, fmt.Errorf("IDX: element type 0x%02x, only unsigned bytes (0x08) are supported", magic[2])
	}
	nd := int(magic[3])
	if nd < 1 || nd > 4 {
		return nil, fmt.Errorf("IDX: %d dimensions", nd)
	}
	x := &IDX{Dims: make([]int, nd)}
	total := 1
	for i := range x.Dims {
		var d uint32
		if err := binary.Read(br, binary.BigEndian, &d); err != nil {
			return nil, fmt.Errorf("IDX: reading dimension %d: %w", i, err)
		}
		if d == 0 || d > 1<<24 {
			return nil, fmt.Errorf("IDX: dimension %d is %d", i, d)
		}
		x.Dims[i] = int(d)
		total *= int(d)
		if total > 1<<31 {
			return nil, errors.New("IDX: array too large")
		}
	}
	x.Data = make([]byte, total)
	if _, err := io.ReadFull(br, x.Data); err != nil {
		return nil, fmt.Errorf("IDX: expected %d bytes of data: %w", total, err)
	}
	return x, nil
}

// ReadIDXFile reads an IDX file (gzipped or not).
func ReadIDXFile(path string) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	x, err := ReadIDX(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return x, nil
}

// Images is an image data set split: Pixels[i] holds the pixels of image i scaled to [0, 1].
type Images struct {
	Pixels [][]float32
	Labels []int
	Width  int
	Height int
}

// FashionMNISTDirs are the directories searched for Fashion-MNIST, in order: the Debian package
// dataset-fashion-mnist, $LDPSQL_DATA (the files directly in it, or in its fashion-mnist/), and the
// project's shared data beside the working directory.
func FashionMNISTDirs() []string {
	dirs := []string{"/usr/share/datasets/fashion-mnist"}
	if d := os.Getenv("LDPSQL_DATA"); d != "" {
		dirs = append(dirs, filepath.Join(d, "fashion-mnist"), d)
	}
	return append(dirs, filepath.Join("..", "shared", "data", "fashion-mnist"))
}

// LoadFashionMNIST loads the train (60,000) or test (10,000) split from the first directory of
// FashionMNISTDirs that has it, and says where it looked when none has.
func LoadFashionMNIST(split string) (*Images, string, error) {
	prefix := map[string]string{"train": "train", "test": "t10k"}[split]
	if prefix == "" {
		return nil, "", fmt.Errorf("Fashion-MNIST split %q: want train or test", split)
	}
	var looked []string
	for _, dir := range FashionMNISTDirs() {
		imgPath, lblPath := findIDX(dir, prefix+"-images-idx3-ubyte"), findIDX(dir, prefix+"-labels-idx1-ubyte")
		if imgPath == "" || lblPath == "" {
			looked = append(looked, dir)
			continue
		}
		imgs, err := readImages(imgPath, lblPath)
		return imgs, dir, err
	}
	return nil, "", fmt.Errorf("Fashion-MNIST not found: looked for %s-images-idx3-ubyte(.gz) and %s-labels-idx1-ubyte(.gz) in %s. Install it with `apt-get install dataset-fashion-mnist`, or set LDPSQL_DATA to a directory that holds the files",
		prefix, prefix, strings.Join(looked, ", "))
}

func findIDX(dir, base string) string {
	for _, name := range []string{base + ".gz", base} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

func readImages(imgPath, lblPath string) (*Images, error) {
	img, err := ReadIDXFile(imgPath)
	if err != nil {
		return nil, err
	}
	lbl, err := ReadIDXFile(lblPath)
	if err != nil {
		return nil, err
	}
	if len(img.Dims) != 3 || len(lbl.Dims) != 1 || img.Dims[0] != lbl.Dims[0] {
		return nil, fmt.Errorf("%s (%v) and %s (%v) do not describe the same images", imgPath, img.Dims, lblPath, lbl.Dims)
	}
	n, h, w := img.Dims[0], img.Dims[1], img.Dims[2]
	out := &Images{Pixels: make([][]float32, n), Labels: make([]int, n), Width: w, Height: h}
	for i := 0; i < n; i++ {
		px := make([]float32, h*w)
		for j, b := range img.Data[i*h*w : (i+1)*h*w] {
			px[j] = float32(b) / 255
		}
		out.Pixels[i] = px
		out.Labels[i] = int(lbl.Data[i])
	}
	return out, nil
}
