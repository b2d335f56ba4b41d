package membership

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// MemLeases is an in-memory set of member Leases: the membership tests drive the hook's half and read
// the agents' reports through it (the e2e suite exercises the real Lease path).
type MemLeases struct {
	mu     sync.Mutex
	leases map[string]*memLease
	Clock  func() time.Time
}

type memLease struct {
	ann     map[string]string
	holder  string
	renewed time.Time
}

// NewMemLeases makes an empty set whose clock is time.Now.
func NewMemLeases() *MemLeases { return &MemLeases{leases: map[string]*memLease{}, Clock: time.Now} }

// SetIntent writes the hook's half of a Lease, creating it.
func (m *MemLeases) SetIntent(name, intent string, seed bool, permitFor time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[name]
	if l == nil {
		l = &memLease{ann: map[string]string{}}
		m.leases[name] = l
	}
	l.ann[api.AnnIntent] = intent
	delete(l.ann, api.AnnBootstrap)
	if seed {
		l.ann[api.AnnBootstrap] = api.BootstrapSeed
	}
	delete(l.ann, api.AnnJoinPermitted)
	delete(l.ann, api.AnnJoinDeadline)
	if permitFor > 0 {
		now := m.Clock()
		l.ann[api.AnnJoinPermitted] = now.UTC().Format(time.RFC3339)
		l.ann[api.AnnJoinDeadline] = now.Add(permitFor).UTC().Format(time.RFC3339)
	}
}

// SetDefrag writes (or, with "", removes) the hook's defragmentation request on a Lease.
func (m *MemLeases) SetDefrag(name, token string) {
	m.setAnnotations(name, map[string]string{api.AnnDefrag: token})
}

// SetRenewal writes (or, with "", removes) the hook's renewal mark on a Lease (etcd.io/renewal).
func (m *MemLeases) SetRenewal(name, mark string) {
	m.setAnnotations(name, map[string]string{api.AnnRenewal: mark})
}

// SetCA writes (or, with "", removes) the hook's CA rotation step and restart permission on a Lease
// (etcd.io/ca-rotation, etcd.io/ca-restart).
func (m *MemLeases) SetCA(name, rotation, restart string) {
	m.setAnnotations(name, map[string]string{api.AnnCARotation: rotation, api.AnnCARestart: restart})
}

// SetPeerScheme writes (or, with "", removes) the hook's etcd.io/peer-scheme on a Lease.
func (m *MemLeases) SetPeerScheme(name, scheme string) {
	m.setAnnotations(name, map[string]string{api.AnnPeerScheme: scheme})
}

// SetRecover writes (or, with a zero intent, removes) the hook's etcd.io/recover on a Lease.
func (m *MemLeases) SetRecover(name string, rc api.RecoverIntent) {
	m.setAnnotations(name, map[string]string{api.AnnRecover: rc.String()})
}

// setAnnotations writes the hook's annotations on a Lease: each key with its value, or removed where
// the value is "".
func (m *MemLeases) setAnnotations(name string, anns map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[name]
	if l == nil {
		return
	}
	for k, v := range anns {
		delete(l.ann, k)
		if v != "" {
			l.ann[k] = v
		}
	}
}

// Report returns the agent's last report on a Lease.
func (m *MemLeases) Report(name string) api.Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.leases[name]; l != nil {
		r, _ := api.ParseReport(l.ann)
		return r
	}
	return api.Report{}
}

// Store is the LeaseStore of one agent.
func (m *MemLeases) Store(name, holder string) LeaseStore {
	return &memStore{m: m, name: name, holder: holder}
}

type memStore struct {
	m      *MemLeases
	name   string
	holder string
}

func (s *memStore) Now() time.Time { return s.m.Clock() }

func (s *memStore) Read(context.Context) (Intent, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	l := s.m.leases[s.name]
	if l == nil {
		return Intent{}, ErrNoLease
	}
	return intentFromAnnotations(l.ann), nil
}

func (s *memStore) Write(_ context.Context, r api.Report) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	l := s.m.leases[s.name]
	if l == nil {
		return ErrNoLease
	}
	for k, v := range r.Annotations() {
		l.ann[k] = v
	}
	l.holder, l.renewed = s.holder, s.m.Clock()
	return nil
}

func (s *memStore) Peers(context.Context) ([]api.Report, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	var out []api.Report
	for _, name := range sortedKeysOf(s.m.leases) {
		l := s.m.leases[name]
		if l.holder == "" || s.m.Clock().Sub(l.renewed) > memLeaseFresh {
			continue
		}
		r, _ := api.ParseReport(l.ann)
		out = append(out, r)
	}
	return out, nil
}

// memLeaseFresh: how long a report in memory counts as fresh (the tests' agents renew every second or so).
const memLeaseFresh = 15 * time.Second

func (s *memStore) ClusterIDs(context.Context) ([]string, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	seen := map[string]bool{}
	for _, l := range s.m.leases {
		if id := l.ann[api.AnnClusterID]; id != "" {
			seen[id] = true
		}
	}
	var out []string
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}
