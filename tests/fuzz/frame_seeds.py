#!/usr/bin/env python3
"""frame_seeds.py - writes the seed corpora of the framing fuzz targets (fuzz_frame.c) from
real conversations: HTTP/1.1, TLS 1.2 and 1.3 handshakes (Python's ssl over memory BIOs),
a PostgreSQL startup and query, Redis commands and a subscription.

usage: tests/fuzz/frame_seeds.py [CORPUS_DIR]   (default: tests/fuzz/corpus)
Each conversation is written cut as the kernel might cut it (whole messages, random cuts,
one byte at a time), in the script form fuzz_frame.c reads. Deterministic (seeded), so the
committed seeds change only when this file does. Keeps any other file in the directories.
"""
import os
import random
import ssl
import struct
import subprocess
import sys
import tempfile

SENT, RECV = 0, 1


def script(conv, cuts, rnd):
    """conv: [(direction, bytes) or ('eof',)]; cuts: 'whole', 'random' or 'bytes'."""
    out = bytearray()
    for step in conv:
        if step[0] == 'eof':
            out.append(0x80 | 0x40 | 1)
            continue
        d, data = step
        i = 0
        while i < len(data):
            if cuts == 'bytes':
                n = 1
            elif cuts == 'random':
                n = rnd.randint(1, 64)
            else:
                n = len(data) - i
            n = min(n, len(data) - i)
            if n <= 64:
                out.append((d << 7) | (n - 1))
            else:
                n = min(n, 65536)
                out.append((d << 7) | 0x40)
                out += struct.pack('>H', n - 1)
            out += data[i:i + n]
            i += n
    return bytes(out)


def http():
    req = (b'GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/7.88.1\r\n'
           b'Accept: */*\r\n\r\n')
    resp = (b'HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\n\r\n'
            b'<html></html>')
    post = (b'POST /api HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n'
            b'5\r\nhello\r\n0\r\n\r\n')
    chunked = (b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n'
               b'4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nTrailer: x\r\n\r\n')
    head = b'HEAD / HTTP/1.1\r\nHost: a\r\n\r\n'
    head_resp = b'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n'
    cont = (b'PUT /f HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n')
    upgrade = (b'GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
               b'\r\n')
    connect = b'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'
    return {
        'get': [(SENT, req), (RECV, resp), (SENT, req), (RECV, resp)],
        'post_chunked': [(SENT, post), (RECV, chunked)],
        'pipelined_head': [(SENT, head + req), (RECV, head_resp + resp)],
        'continue': [(SENT, cont), (RECV, b'HTTP/1.1 100 Continue\r\n\r\n'), (SENT, b'abc'),
                     (RECV, b'HTTP/1.1 204 No Content\r\n\r\n')],
        'until_eof': [(SENT, b'GET / HTTP/1.0\r\n\r\n'),
                      (RECV, b'HTTP/1.0 200 OK\r\n\r\nbody until close'), ('eof',)],
        'websocket': [(SENT, upgrade),
                      (RECV, b'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n'
                             b'Connection: Upgrade\r\n\r\n'), (SENT, b'\x81\x05hello')],
        'connect_tunnel': [(SENT, connect), (RECV, b'HTTP/1.1 200 Connection established\r\n'
                                                   b'\r\n')],
    }


def tls_flights(version):
    """A real handshake and one request/response between Python's ssl client and server."""
    with tempfile.TemporaryDirectory() as tmp:
        key, crt = os.path.join(tmp, 'k.pem'), os.path.join(tmp, 'c.pem')
        subprocess.run(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt',
                        'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', crt,
                        '-days', '1', '-subj', '/CN=localhost'],
                       check=True, capture_output=True)
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(crt, key)
        cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        cctx.check_hostname = False
        cctx.verify_mode = ssl.CERT_NONE
        for ctx in (sctx, cctx):
            ctx.minimum_version = ctx.maximum_version = version
        cin, cout, sin, sout = (ssl.MemoryBIO() for _ in range(4))
        c = cctx.wrap_bio(cin, cout, server_side=False, server_hostname='localhost')
        s = sctx.wrap_bio(sin, sout, server_side=True)
        conv = []

        def pump():
            moved = False
            data = cout.read()
            if data:
                conv.append((SENT, data))
                sin.write(data)
                moved = True
            data = sout.read()
            if data:
                conv.append((RECV, data))
                cin.write(data)
                moved = True
            return moved

        done = [False, False]
        for _ in range(20):
            for i, side in enumerate((c, s)):
                if not done[i]:
                    try:
                        side.do_handshake()
                        done[i] = True
                    except ssl.SSLWantReadError:
                        pass
            if not pump() and all(done):
                break
        c.write(b'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n')
        pump()
        try:
            s.read(4096)
        except ssl.SSLWantReadError:
            pass
        s.write(b'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')
        pump()
        try:
            c.read(4096)
        except ssl.SSLWantReadError:
            pass
        c.write(b'GET /again HTTP/1.1\r\nHost: localhost\r\n\r\n')
        pump()
        return conv


def tls():
    return {'tls13': tls_flights(ssl.TLSVersion.TLSv1_3),
            'tls12': tls_flights(ssl.TLSVersion.TLSv1_2)}


def pg_msg(t, body):
    return t + struct.pack('>I', len(body) + 4) + body


def pg():
    params = b'user\0postgres\0database\0postgres\0application_name\0psql\0\0'
    startup = struct.pack('>II', len(params) + 8, 196608) + params
    ssl_request = struct.pack('>II', 8, 80877103)
    server = (pg_msg(b'R', struct.pack('>I', 0)) +
              pg_msg(b'S', b'server_version\x0015.5\0') +
              pg_msg(b'S', b'client_encoding\0UTF8\0') +
              pg_msg(b'K', struct.pack('>II', 1234, 5678)) + pg_msg(b'Z', b'I'))
    query = pg_msg(b'Q', b'SELECT 1\0')
    answer = (pg_msg(b'T', struct.pack('>H', 1) + b'?column?\0' +
                     struct.pack('>IhIhih', 0, 0, 23, 4, -1, 0)) +
              pg_msg(b'D', struct.pack('>HI', 1, 1) + b'1') +
              pg_msg(b'C', b'SELECT 1\0') + pg_msg(b'Z', b'I'))
    extended = (pg_msg(b'P', b'\0SELECT $1\0\0\0') + pg_msg(b'B', b'\0\0\0\0\0\1\0\0\0\0') +
                pg_msg(b'E', b'\0\0\0\0\0') + pg_msg(b'S', b''))
    ext_answer = (pg_msg(b'1', b'') + pg_msg(b'2', b'') + pg_msg(b'C', b'SELECT 1\0') +
                  pg_msg(b'Z', b'I'))
    return {
        'startup_query': [(SENT, startup), (RECV, server), (SENT, query), (RECV, answer),
                          (SENT, pg_msg(b'X', b''))],
        'extended': [(SENT, startup), (RECV, server), (SENT, extended), (RECV, ext_answer)],
        'ssl_refused': [(SENT, ssl_request), (RECV, b'N'), (SENT, startup), (RECV, server)],
        'ssl_accepted': [(SENT, ssl_request), (RECV, b'S')] +
                        tls_flights(ssl.TLSVersion.TLSv1_3)[:2],
    }


def resp_cmd(*args):
    out = b'*%d\r\n' % len(args)
    for a in args:
        out += b'$%d\r\n%s\r\n' % (len(a), a)
    return out


def resp():
    return {
        'get_set': [(SENT, resp_cmd(b'SET', b'k', b'v')), (RECV, b'+OK\r\n'),
                    (SENT, resp_cmd(b'GET', b'k')), (RECV, b'$1\r\nv\r\n'),
                    (SENT, resp_cmd(b'MGET', b'k', b'x')), (RECV, b'*2\r\n$1\r\nv\r\n$-1\r\n')],
        'pipeline': [(SENT, resp_cmd(b'INCR', b'n') + resp_cmd(b'PING')),
                     (RECV, b':1\r\n+PONG\r\n'), (SENT, resp_cmd(b'HGETALL', b'h')),
                     (RECV, b'%1\r\n+a\r\n,1.5\r\n')],
        'error': [(SENT, resp_cmd(b'BOGUS')), (RECV, b'-ERR unknown command\r\n')],
        'subscribe': [(SENT, resp_cmd(b'SUBSCRIBE', b'ch')),
                      (RECV, b'*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n'),
                      (RECV, b'*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n')],
    }


def main():
    corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'corpus')
    rnd = random.Random(12)
    groups = {'frame_http': http(), 'frame_tls': tls(), 'frame_pg': pg(),
              'frame_resp': resp()}
    pick = {}
    # frame_pick: the first byte is the rule's protocol (enum tb_proto: 0 auto, 1 http,
    # 2 tls, 3 postgres, 4 redis, 5 session, 6 raw); detection sees every conversation.
    forced = {'frame_http': 1, 'frame_tls': 2, 'frame_pg': 3, 'frame_resp': 4}
    for target, convs in groups.items():
        d = os.path.join(corpus, target)
        os.makedirs(d, exist_ok=True)
        for name, conv in convs.items():
            for cuts in ('whole', 'random', 'bytes'):
                data = script(conv, cuts, rnd)
                with open(os.path.join(d, '%s_%s' % (name, cuts)), 'wb') as f:
                    f.write(data)
                if cuts == 'random':
                    pick['%s_%s_auto' % (target[6:], name)] = bytes([0]) + data
                    pick['%s_%s_forced' % (target[6:], name)] = \
                        bytes([forced[target]]) + data
    ssh = [(RECV, b'SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n'), (SENT, b'SSH-2.0-OpenSSH_9.2\r\n')]
    pick['ssh'] = bytes([0]) + script(ssh, 'random', rnd)
    pick['smtp_raw'] = bytes([0]) + script([(RECV, b'220 mail ESMTP\r\n'),
                                            (SENT, b'EHLO x\r\n')], 'whole', rnd)
    d = os.path.join(corpus, 'frame_pick')
    os.makedirs(d, exist_ok=True)
    for name, data in pick.items():
        with open(os.path.join(d, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
