package membership

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// MemSecrets is an in-memory SecretStore with the API server's create and update semantics (one
// winner per create, resourceVersion preconditions): the membership tests run real etcd with it.
type MemSecrets struct {
	mu      sync.Mutex
	seq     int
	secrets map[string]memSecret
	// foreign: Secrets another application owns (GetOwned refuses them).
	foreign map[string]bool
}

type memSecret struct {
	data    map[string][]byte
	version string
}

func NewMemSecrets() *MemSecrets { return &MemSecrets{secrets: map[string]memSecret{}} }

func (m *MemSecrets) Get(_ context.Context, name string) (map[string][]byte, string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.secrets[name]
	return copyData(s.data), s.version, ok, nil
}

func (m *MemSecrets) GetOwned(ctx context.Context, name string) (map[string][]byte, string, bool, error) {
	m.mu.Lock()
	foreign := m.foreign[name]
	m.mu.Unlock()
	if foreign {
		return nil, "", false, fmt.Errorf("Secret %s: %w", name, ErrSecretNotOwned)
	}
	return m.Get(ctx, name)
}

// PutForeign stores a Secret another application owns.
func (m *MemSecrets) PutForeign(name string, data map[string][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.foreign == nil {
		m.foreign = map[string]bool{}
	}
	m.foreign[name] = true
	m.seq++
	m.secrets[name] = memSecret{data: copyData(data), version: strconv.Itoa(m.seq)}
}

func (m *MemSecrets) Create(_ context.Context, name string, data map[string][]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.secrets[name]; ok {
		return ErrSecretExists
	}
	m.seq++
	m.secrets[name] = memSecret{data: copyData(data), version: strconv.Itoa(m.seq)}
	return nil
}

func (m *MemSecrets) Update(_ context.Context, name, version string, data map[string][]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.secrets[name]
	if !ok || s.version != version {
		return ErrSecretConflict
	}
	m.seq++
	m.secrets[name] = memSecret{data: copyData(data), version: strconv.Itoa(m.seq)}
	return nil
}

// Delete removes a Secret (tests: a CA deleted by hand).
func (m *MemSecrets) Delete(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.secrets, name)
}
