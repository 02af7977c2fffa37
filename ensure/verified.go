package ensure

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// maxVerified bounds an Ensurer's memory of verified children (verified):
// 262,144 children, about 8 MiB. Past it, an arbitrary entry makes room: that
// child is compared again the next time, which is all forgetting costs.
const maxVerified = 1 << 18

// verified remembers, per child, the last comparison that found the cached
// object holding its declaration (Unchanged): the object's UID and
// resourceVersion and a digest of the declaration. Any write to the object
// by anyone (an edit, a status update, a delete and re-create) changes its
// resourceVersion or UID, and any change of the declaration or its owner
// changes the digest; either makes the next Ensure compare in full again,
// so drift is still found and corrected. What the memo saves is the
// conversion of the cached object to a tree, the record and the
// comparison when neither side moved. Entries go when ensure sees the
// child gone (the cache has no such object, or it pruned it), and the memo
// holds at most maxVerified entries.
//
// An entry is 24 bytes, held by value in the map (no strings kept): the
// child's key hashed to 64 bits, and the first 128 bits of a SHA-256 of its
// UID, resourceVersion and declaration digest. Two keys hashing alike only
// share a slot (one evicts the other: a comparison, not a wrong answer),
// since the UID in the value tells children apart; a false "holds" would
// need a 128-bit collision of SHA-256.
type verified struct {
	mu      sync.Mutex
	seed    maphash.Seed
	entries map[uint64]verifiedEntry
}

type verifiedEntry [16]byte

func (v *verified) slot(k objectKey) uint64 {
	var h maphash.Hash
	h.SetSeed(v.seed)
	for _, s := range [...]string{k.gvk.Group, k.gvk.Version, k.gvk.Kind, k.namespace, k.name} {
		h.WriteString(s)
		h.WriteByte(0)
	}
	return h.Sum64()
}

func entryOf(uid types.UID, rv string, d [sha256.Size]byte) verifiedEntry {
	h := sha256.New()
	h.Write([]byte(uid))
	h.Write([]byte{0})
	h.Write([]byte(rv))
	h.Write([]byte{0})
	h.Write(d[:])
	var e verifiedEntry
	copy(e[:], h.Sum(nil))
	return e
}

// holds reports whether the child at k, now at uid and rv, was found to
// hold the declaration with digest d and has not changed since.
func (v *verified) holds(k objectKey, uid types.UID, rv string, d [sha256.Size]byte) bool {
	if rv == "" || uid == "" {
		return false
	}
	want := entryOf(uid, rv, d)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.entries == nil {
		return false
	}
	e, ok := v.entries[v.slot(k)]
	return ok && e == want
}

// set records that the child at k, at uid and rv, holds the declaration
// with digest d.
func (v *verified) set(k objectKey, uid types.UID, rv string, d [sha256.Size]byte) {
	if rv == "" || uid == "" {
		return
	}
	e := entryOf(uid, rv, d)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.entries == nil {
		v.entries = map[uint64]verifiedEntry{}
		v.seed = maphash.MakeSeed()
	}
	slot := v.slot(k)
	if _, ok := v.entries[slot]; !ok && len(v.entries) >= maxVerified {
		for old := range v.entries {
			delete(v.entries, old)
			break
		}
	}
	v.entries[slot] = e
}

// forget drops what is known of the child at k.
func (v *verified) forget(k objectKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.entries != nil {
		delete(v.entries, v.slot(k))
	}
}

// declDigest is a digest of everything an Ensure of one child reads besides
// the live object: the declaration (every field and value, map keys in
// order) and the owner it is linked to.
func declDigest(decl map[string]any, oi ownerInfo, ownerRef bool) [sha256.Size]byte {
	var b bytes.Buffer
	b.WriteString(string(oi.uid))
	b.WriteByte(0)
	b.WriteString(oi.annotation)
	b.WriteByte(0)
	b.WriteString(oi.gvk.String())
	b.WriteByte(0)
	b.WriteString(oi.name)
	if ownerRef {
		b.WriteString("\x00ref")
	}
	b.WriteByte(0)
	writeValue(&b, decl)
	return sha256.Sum256(b.Bytes())
}

// writeValue writes a tree unambiguously: every string with its length, map
// keys in order, each value with its type.
func writeValue(b *bytes.Buffer, v any) {
	switch t := v.(type) {
	case map[string]any:
		var buf [16]string // no allocation for the keys of most maps
		keys := buf[:0]
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for _, k := range keys {
			writeLen(b, k)
			writeValue(b, t[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for _, e := range t {
			writeValue(b, e)
		}
		b.WriteByte(']')
	default:
		writeScalar(b, v)
	}
}

// textWriter is a bytes.Buffer or a strings.Builder.
type textWriter interface {
	io.ByteWriter
	io.StringWriter
}

// writeLen writes s with its length, so it ends unambiguously.
func writeLen(w textWriter, s string) {
	_, _ = w.WriteString(strconv.Itoa(len(s)))
	_ = w.WriteByte(':')
	_, _ = w.WriteString(s)
}

// writeScalar writes a leaf of a tree unambiguously, tagged with its type:
// a string, bool, int64, float64 or nil, and any other value by its type
// and text.
func writeScalar(w textWriter, v any) {
	switch t := v.(type) {
	case string:
		_ = w.WriteByte('s')
		writeLen(w, t)
	case bool:
		if t {
			_ = w.WriteByte('T')
		} else {
			_ = w.WriteByte('F')
		}
	case int64:
		_ = w.WriteByte('i')
		_, _ = w.WriteString(strconv.FormatInt(t, 10))
		_ = w.WriteByte(';')
	case float64:
		_ = w.WriteByte('f')
		_, _ = w.WriteString(strconv.FormatUint(math.Float64bits(t), 16))
		_ = w.WriteByte(';')
	case nil:
		_ = w.WriteByte('n')
	default:
		// Other JSON-like values (json.Number…), by type and text.
		_ = w.WriteByte('x')
		writeLen(w, fmt.Sprintf("%T:%v", t, t))
	}
}
