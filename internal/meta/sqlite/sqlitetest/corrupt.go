// Package sqlitetest damages SQLite metadata stores on purpose, for tests
// of what poolfs does with a corrupt store. It is used by tests only.
package sqlitetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
)

// Page types of SQLite's B-tree pages (a WITHOUT ROWID table is an index
// B-tree).
const leafIndexPage = 0x0a

// CorruptLeafPages overwrites the cell pointer array of every leaf page of
// the database file at path (a stopped store: no WAL) that holds the byte
// string pattern (for instance the key prefix of a file's stripe records),
// so that SQLite cannot find the cells of the page: its records are gone
// to readers and integrity checks fail. It returns the numbers of the pages
// it damaged; a pattern found in no leaf page is an error.
func CorruptLeafPages(path string, pattern []byte) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 100 || string(b[:16]) != "SQLite format 3\x00" {
		return nil, fmt.Errorf("sqlitetest: %s is not a SQLite database", path)
	}
	size := int(binary.BigEndian.Uint16(b[16:]))
	if size == 1 {
		size = 65536
	}
	var pages []int
	for off := 0; off+size <= len(b); off += size {
		page := b[off : off+size]
		hdr := 0
		if off == 0 {
			hdr = 100 // page 1 starts with the file header
		}
		if page[hdr] != leafIndexPage || !bytes.Contains(page, pattern) {
			continue
		}
		cells := int(binary.BigEndian.Uint16(page[hdr+3:]))
		ptrs := page[hdr+8:]
		for i := 0; i < cells && 2*i+1 < len(ptrs); i++ {
			binary.BigEndian.PutUint16(ptrs[2*i:], 0xfff0-uint16(i)) // past the page's end
		}
		pages = append(pages, off/size+1)
	}
	if len(pages) == 0 {
		return nil, fmt.Errorf("sqlitetest: no leaf page of %s holds %x", path, pattern)
	}
	return pages, os.WriteFile(path, b, 0o600)
}

// EditAfter calls edit with the bytes that follow each occurrence of
// pattern in the database file at path (a stopped store: no WAL) up to the
// end of its page, and writes back what edit changed: in a cell of poolfs's
// kv table a key is followed by its value, so edit can damage the value of
// one record while the page stays well-formed (no integrity check can see
// it). It returns the number of occurrences.
func EditAfter(path string, pattern []byte, edit func(rest []byte)) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(b) < 100 || string(b[:16]) != "SQLite format 3\x00" {
		return 0, fmt.Errorf("sqlitetest: %s is not a SQLite database", path)
	}
	size := int(binary.BigEndian.Uint16(b[16:]))
	if size == 1 {
		size = 65536
	}
	n := 0
	for i := 0; ; {
		j := bytes.Index(b[i:], pattern)
		if j < 0 {
			break
		}
		at := i + j + len(pattern)
		edit(b[at : (at/size+1)*size])
		n++
		i = at
	}
	if n == 0 {
		return 0, fmt.Errorf("sqlitetest: %s does not hold %x", path, pattern)
	}
	return n, os.WriteFile(path, b, 0o600)
}
