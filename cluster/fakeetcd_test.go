package cluster_test

import (
	"context"
	"net"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// fakeEtcd is an etcd server that answers what the etcd provider asks
// (an empty member list; any lease, kept alive; any put; a watch that
// sees nothing), except one kind of request, which it never answers:
// "grant" (a lease, when a member registers) or "delete" (when it
// deregisters).
type fakeEtcd struct {
	pb.UnimplementedKVServer
	pb.UnimplementedLeaseServer
	pb.UnimplementedWatchServer
	silentOn string
}

// startFakeEtcd serves a fakeEtcd silent on silentOn on loopback and
// returns its endpoint, and stop, which stops it.
func startFakeEtcd(t *testing.T, silentOn string) (endpoint string, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	f := &fakeEtcd{silentOn: silentOn}
	pb.RegisterKVServer(s, f)
	pb.RegisterLeaseServer(s, f)
	pb.RegisterWatchServer(s, f)
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.Serve(l)
	}()
	return l.Addr().String(), func() {
		s.Stop() // ends the unanswered requests too
		<-served
	}
}

var fakeHeader = &pb.ResponseHeader{ClusterId: 1, MemberId: 1, Revision: 1, RaftTerm: 1}

func (f *fakeEtcd) silent(ctx context.Context, kind string) bool {
	if f.silentOn != kind {
		return false
	}
	<-ctx.Done()
	return true
}

func (f *fakeEtcd) Range(context.Context, *pb.RangeRequest) (*pb.RangeResponse, error) {
	return &pb.RangeResponse{Header: fakeHeader}, nil
}

func (f *fakeEtcd) Put(context.Context, *pb.PutRequest) (*pb.PutResponse, error) {
	return &pb.PutResponse{Header: fakeHeader}, nil
}

func (f *fakeEtcd) DeleteRange(ctx context.Context, _ *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if f.silent(ctx, "delete") {
		return nil, ctx.Err()
	}
	return &pb.DeleteRangeResponse{Header: fakeHeader, Deleted: 1}, nil
}

func (f *fakeEtcd) LeaseGrant(ctx context.Context, req *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	if f.silent(ctx, "grant") {
		return nil, ctx.Err()
	}
	return &pb.LeaseGrantResponse{Header: fakeHeader, ID: 1, TTL: req.TTL}, nil
}

func (f *fakeEtcd) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		if err := stream.Send(&pb.LeaseKeepAliveResponse{Header: fakeHeader, ID: req.ID, TTL: 3}); err != nil {
			return nil
		}
	}
}

func (f *fakeEtcd) Watch(stream pb.Watch_WatchServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		if req.GetCreateRequest() != nil {
			if err := stream.Send(&pb.WatchResponse{Header: fakeHeader, Created: true}); err != nil {
				return nil
			}
		}
	}
}
