package remote_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/remote"
)

// TestClient_ToolsRefusesWhatIsNoNodeAddress: an address that is no
// host:port a node can listen at (empty, no port, port 0 or out of
// range) and the client's own address (it serves no tools: a DESCRIBE
// sent there met no actor and waited for its ctx) are refused at once,
// with remote.ErrNodeAddress and the address named, rather than
// answered after a dial, or not at all.
func TestClient_ToolsRefusesWhatIsNoNodeAddress(t *testing.T) {
	t.Parallel()
	port := sharedClient.Address()[strings.LastIndexByte(sharedClient.Address(), ':'):]
	for _, addr := range []string{"", "nohostport", ":7", "127.0.0.1:0", "127.0.0.1:99999", "127.0.0.1:x",
		sharedClient.Address(), "localhost" + port} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		_, err := sharedClient.Tools(ctx, addr)
		cancel()
		if !errors.Is(err, remote.ErrNodeAddress) || !strings.Contains(err.Error(), `"`+addr+`"`) {
			t.Errorf("Tools(%q): %v; want remote.ErrNodeAddress, naming the address", addr, err)
		}
	}
}
