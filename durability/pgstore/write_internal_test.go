package pgstore

import "testing"

// A batch whose failure is the server's (or the connection's) fails as a
// whole; one whose failure may be one write's is retried write by write.
func TestServerFailure(t *testing.T) {
	for code, want := range map[string]bool{
		"25006": true,  // read_only_sql_transaction
		"08006": true,  // connection_failure
		"08P01": true,  // protocol_violation
		"57P01": true,  // admin_shutdown
		"57P02": true,  // crash_shutdown
		"57P03": true,  // cannot_connect_now
		"53100": true,  // disk_full
		"57014": false, // query_canceled: a statement timeout
		"53200": false, // out_of_memory: a smaller transaction may fit
		"40001": false, // serialization_failure
		"23505": false, // unique_violation
		"22021": false, // character_not_in_repertoire
		"42501": false, // insufficient_privilege
		"PWF01": false, // a superseded claim
	} {
		if got := serverFailure(code); got != want {
			t.Errorf("serverFailure(%q) = %v, want %v", code, got, want)
		}
	}
}
