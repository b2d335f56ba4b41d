package api

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Values the hook and the agents read out of annotations, labels, ConfigMap keys and status fields are
// written by others as well: a member's own token can patch its Lease, an editor of the namespace can
// patch the hook's ConfigMap, a status writer can put anything in status. The request body's bounds
// (hooks/limits.go) do not see inside a string, and the API server only bounds all of an object's
// annotations together (256 KiB). So every such value is bounded on its own, before it is parsed or
// used: a value beyond its bound is distrusted whole (treated as absent) and reported, never computed
// on (docs/operations.md, "What the hook distrusts").

// MaxReportedMembers bounds an agent's member list. A cluster has at most MaxSize members, one learner
// being added, and the orphans a failure can leave (a member added whose pod never started, a second
// ID at an ordinal): far fewer than this. A longer list is not a cluster the hook made.
const MaxReportedMembers = 4 * MaxSize

// MaxURLBytes bounds a URL read from an input (a member's peer or client URL, a snapshot location):
// the longest the hook renders is under 300 bytes (a 40-character cluster name, a 63-character
// namespace, a backup prefix).
const MaxURLBytes = 1024

// Bound is how much of a value is read. Bytes bounds its length; a JSON value is also bounded in
// nesting (Depth) and in tokens (Tokens: every name, value and opening bracket), which is what its
// decoding costs. Depth 0 means the value is not JSON.
type Bound struct {
	Bytes  int
	Depth  int
	Tokens int
}

// Bounds of the values read, by what they hold. Each is several times the largest value the hook or
// an agent writes; the comments say that largest value.
var (
	// BoundToken: a user's token annotation (backup-now, defrag-now, renew-certificates, rotate-ca,
	// hold-tls-switch), a hook-owned mark, a time, an ID. The largest written is a CA restart's three
	// SHA-256 fingerprints (200 bytes).
	BoundToken = Bound{Bytes: 1024}
	// BoundUserToken: a token a user sets on the EtcdCluster (etcd.io/defrag-now and the like).
	BoundUserToken = Bound{Bytes: 512}
	// BoundText: an agent's error and other free text, quoted into status (which bounds it again).
	BoundText = Bound{Bytes: 4096}
	// BoundURL: a snapshot location (etcd.io/restore-from).
	BoundURL = Bound{Bytes: MaxURLBytes}
	// BoundMembers: the etcd.io/members list, about 300 bytes and 13 tokens a member.
	BoundMembers = Bound{Bytes: MaxReportedMembers * 1024, Depth: 2, Tokens: 1 + MaxReportedMembers*20}
	// BoundReportJSON: a backup Job's report on the backup Lease (under 1 KiB).
	BoundReportJSON = Bound{Bytes: 8 << 10, Depth: 4, Tokens: 256}
	// BoundSpecRecord: the spec the hook recorded in its ConfigMap (spec.json). A spec with every field
	// set is under 4 KiB; options and TLS names add a few hundred bytes each.
	BoundSpecRecord = Bound{Bytes: 64 << 10, Depth: 12, Tokens: 4096}
	// BoundRecordJSON: the hook's other JSON records (the in-place restore record, under 2 KiB).
	BoundRecordJSON = Bound{Bytes: 16 << 10, Depth: 6, Tokens: 1024}
	// BoundLastApplied: Metacontroller's last-applied configuration of a child, the answer echoed when
	// the spec cannot be rendered. The largest child, a 9-member StatefulSet, is about 12 KiB.
	BoundLastApplied = Bound{Bytes: 256 << 10, Depth: 64, Tokens: 20000}
)

// Check says why s is beyond the bound, nil when it is within it.
func (b Bound) Check(s string) error {
	if len(s) > b.Bytes {
		return fmt.Errorf("%d bytes, over the bound of %d", len(s), b.Bytes)
	}
	if b.Depth == 0 || s == "" {
		// An empty value is an absent one (agents write empty values to clear them).
		return nil
	}
	return checkJSON(s, b)
}

// checkJSON reads s token by token (no value is built) and stops at the first bound passed.
func checkJSON(s string, b Bound) error {
	dec := jsontext.NewDecoder(strings.NewReader(s))
	tokens := 0
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			if tokens == 0 {
				return errors.New("empty: not a JSON value")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		if dec.StackDepth() > b.Depth {
			return fmt.Errorf("nested deeper than the bound of %d", b.Depth)
		}
		if k := tok.Kind(); k != '}' && k != ']' {
			if tokens++; tokens > b.Tokens {
				return fmt.Errorf("over the bound of %d JSON tokens", b.Tokens)
			}
		}
		if dec.StackDepth() == 0 && dec.PeekKind() != 0 {
			return errors.New("more than one JSON value")
		}
	}
}

// annotationBounds are the bounds of the annotations the hook and the agents read; any other etcd.io/
// annotation read gets BoundToken.
var annotationBounds = map[string]Bound{
	AnnMembers:          BoundMembers,
	AnnError:            BoundText,
	AnnRestoreFrom:      BoundURL,
	AnnRestoreTo:        BoundUserToken,
	AnnRestoredFrom:     BoundURL,
	AnnBackupSuccess:    BoundReportJSON,
	AnnBackupFailure:    BoundReportJSON,
	AnnBackupContinuous: BoundReportJSON,
	AnnBackupCopy:       BoundReportJSON,
	AnnStandbyReport:    BoundReportJSON,
	AnnRestoreReport:    BoundReportJSON,
	// Alarms: up to two types on every member. CAs: the fingerprints (65 bytes each) a member trusts,
	// a user's bundle included.
	AnnAlarms:    {Bytes: 2 * MaxReportedMembers * 64},
	AnnTLSCAs:    BoundText,
	AnnAuth:      BoundAuthReport,
	AnnCARestart: BoundText,
	// A user's token on the EtcdCluster is carried into Lease annotations with a prefix ("now:" for
	// defrag-now): half of BoundToken leaves room for it.
	AnnDefragNow:         BoundUserToken,
	AnnBackupNow:         BoundUserToken,
	AnnRenewCertificates: BoundUserToken,
	AnnPromote:           BoundUserToken,
	AnnRotateCA:          BoundUserToken,
	AnnHoldTLSSwitch:     BoundUserToken,
}

// AnnotationBound is the bound of annotation key's value.
func AnnotationBound(key string) Bound {
	if b, ok := annotationBounds[key]; ok {
		return b
	}
	return BoundToken
}

// configBounds are the bounds of the hook's ConfigMap keys; any other key gets BoundToken.
var configBounds = map[string]Bound{
	ConfigKeySpec:           BoundSpecRecord,
	ConfigKeyRestoreInPlace: BoundRecordJSON,
	// agent.json is written for the agents and never read back by the hook; its bound only keeps a
	// hand edit from being parsed at length anywhere.
	ConfigKeyAgent: {Bytes: 64 << 10},
	// auth.json: spec.auth within its own bounds (MaxAuthPermissions, MaxAuthKeyTotal) is far below this.
	ConfigKeyAuth: {Bytes: 64 << 10, Depth: 6, Tokens: 4096},
}

// ConfigBound is the bound of the hook's ConfigMap key.
func ConfigBound(key string) Bound {
	if b, ok := configBounds[key]; ok {
		return b
	}
	return BoundToken
}
