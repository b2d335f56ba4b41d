package membership

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// etcd is started without the store credentials a restore loaded into the agent's environment.
func TestEtcdEnvDropsStoreCredentials(t *testing.T) {
	got := etcdEnv([]string{"PATH=/bin", "AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s", "AWS_SESSION_TOKEN=t",
		"GOOGLE_APPLICATION_CREDENTIALS=/x", "STORAGE_EMULATOR_HOST=h:1", "POD_NAME=p", "ETCD_X=AWS_ACCESS_KEY_ID"})
	require.Equal(t, []string{"PATH=/bin", "POD_NAME=p", "ETCD_X=AWS_ACCESS_KEY_ID"}, got)
}
