package membership

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// DataFacts is what the agent knows about its data directory before etcd starts.
type DataFacts struct {
	// Present: the directory holds an initialised member: <data-dir>/member with a WAL file (etcd's own
	// test). Partial: <data-dir>/member exists without a WAL: a start that died before writing one.
	Present bool
	Partial bool
	// MemberID and ClusterID come from etcd's WAL metadata, else from the binding; 0 when unknown.
	MemberID  uint64
	ClusterID uint64
	// Binding is what the agent recorded for this directory, nil when it never did.
	Binding *Binding
}

// Binding ties a data directory to the EtcdCluster (its UID), cluster and member it was written for.
// It lives beside the data directory, in the volume root, so etcd never sees it. ClusterUID keeps its
// first JSON key: the volumes of running members carry it (docs/design/18-names.md).
type Binding struct {
	ClusterUID string `json:"parentUID"`
	ClusterID  string `json:"clusterID"`
	MemberID   string `json:"memberID"`
	PeerURL    string `json:"peerURL"`
	// Restored is the snapshot this data directory was restored from (the seed of a restored cluster;
	// nil for every other), kept so the member reports it across restarts.
	Restored *Restored `json:"restored,omitempty"`
	// Recovered: the recovery token (api.RecoveryToken) this data directory was restarted on as a
	// one-member cluster: --force-new-cluster is given once per token, never again on a later start
	// (it would remove every member that joined since).
	Recovered string `json:"recovered,omitempty"`
}

// Restored names the snapshot a data directory was restored from.
type Restored struct {
	URL      string `json:"url"`
	Revision int64  `json:"revision"`
}

func bindingPath(dataDir string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(dataDir)), "etcdhook-binding.json")
}

// ReadData inspects dataDir without starting etcd. Only "does not exist" is an answer; any other I/O
// error is returned, because an unreadable directory must never look empty or half-initialised: the
// agent would then move a live member's data aside, or join with a new ID beside it.
func ReadData(dataDir string) (DataFacts, error) {
	var df DataFacts
	if b, err := os.ReadFile(bindingPath(dataDir)); err == nil {
		var bd Binding
		if err := json.Unmarshal(b, &bd); err != nil {
			return df, fmt.Errorf("binding file %s: %w", bindingPath(dataDir), err)
		}
		df.Binding = &bd
	} else if !errors.Is(err, os.ErrNotExist) {
		return df, fmt.Errorf("reading the binding: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "member")); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return df, nil
		}
		return df, fmt.Errorf("inspecting the data directory: %w", err)
	}
	walDir := filepath.Join(dataDir, "member", "wal")
	wals, err := walFiles(walDir)
	if err != nil {
		return df, fmt.Errorf("inspecting the data directory: %w", err)
	}
	if len(wals) == 0 {
		df.Partial = true
		return df, nil
	}
	df.Present = true
	node, cluster, err := walMetadata(wals[0])
	switch {
	case err == nil:
		df.MemberID, df.ClusterID = node, cluster
	case !errors.Is(err, errWALFormat):
		return df, fmt.Errorf("reading the WAL: %w", err)
	case df.Binding != nil:
		// A WAL we cannot parse (a format we do not know) is etcd's to judge; the binding says whose it is.
		df.MemberID, _ = parseHex(df.Binding.MemberID)
		df.ClusterID, _ = parseHex(df.Binding.ClusterID)
	}
	return df, nil
}

// walFiles lists the *.wal files of walDir in name order (etcd's order: sequence, then index). A missing
// directory has none; any other error is returned (filepath.Glob would swallow it).
func walFiles(walDir string) ([]string, error) {
	entries, err := os.ReadDir(walDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wal") {
			out = append(out, filepath.Join(walDir, e.Name()))
		}
	}
	return out, nil
}

// WriteBinding records the binding atomically.
func WriteBinding(dataDir string, b Binding) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	path := bindingPath(dataDir)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WAL record types (server/storage/wal) and the metadata protobuf fields (etcdserverpb.Metadata).
const (
	walMetadataType = 1
	walRecordType   = 1 // walpb.Record field numbers: type=1, crc=2, data=3
	walRecordData   = 3
	metaNodeID      = 1
	metaClusterID   = 2
)

// errWALFormat marks a WAL file that was read but is not what walMetadata understands (as opposed to
// one that could not be read).
var errWALFormat = errors.New("unrecognised WAL")

// walMetadata reads NodeID and ClusterID from the metadata record at the start of the first WAL file,
// without the etcd server packages: frames are a little-endian length (top byte: padding) and a walpb.Record.
func walMetadata(name string) (node, cluster uint64, err error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	// A short read is a torn or preallocated-but-empty file: a format question, not an I/O error.
	short := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w %s: %v", errWALFormat, name, err)
		}
		return fmt.Errorf("WAL %s: %w", name, err)
	}
	for i := 0; i < 8; i++ {
		var lenField [8]byte
		if _, err := io.ReadFull(r, lenField[:]); err != nil {
			return 0, 0, short(err)
		}
		v := binary.LittleEndian.Uint64(lenField[:])
		recBytes := int64(v & 0x00ffffffffffffff)
		var pad int64
		if v&(1<<63) != 0 {
			pad = int64((v >> 56) & 0x7)
		}
		if recBytes <= 0 || recBytes > 1<<20 {
			return 0, 0, fmt.Errorf("%w %s: bad frame length %d", errWALFormat, name, recBytes)
		}
		buf := make([]byte, recBytes+pad)
		if _, err := io.ReadFull(r, buf); err != nil {
			return 0, 0, short(err)
		}
		typ, data := walRecord(buf[:recBytes])
		if typ == walMetadataType {
			node, cluster = metadata(data)
			if node == 0 {
				return 0, 0, fmt.Errorf("%w %s: metadata without a member ID", errWALFormat, name)
			}
			return node, cluster, nil
		}
	}
	return 0, 0, fmt.Errorf("%w %s: no metadata record", errWALFormat, name)
}

func walRecord(b []byte) (typ int64, data []byte) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, nil
		}
		b = b[n:]
		switch {
		case num == walRecordType && wt == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			typ, n = int64(v), m
		case num == walRecordData && wt == protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, wt, b)
		}
		if n < 0 {
			return 0, nil
		}
		b = b[n:]
	}
	return typ, data
}

func metadata(b []byte) (node, cluster uint64) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, 0
		}
		b = b[n:]
		if wt == protowire.VarintType && (num == metaNodeID || num == metaClusterID) {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return 0, 0
			}
			if num == metaNodeID {
				node = v
			} else {
				cluster = v
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, wt, b)
		if m < 0 {
			return 0, 0
		}
		b = b[m:]
	}
	return node, cluster
}

func parseHex(s string) (uint64, error) {
	var v uint64
	_, err := fmt.Sscanf(strings.TrimSpace(s), "%x", &v)
	return v, err
}
