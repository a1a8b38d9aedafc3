/* resolve.c - which lookups phase dns bounds, and how a lookup takes part in the thread's
 * budget. The lookup itself runs on the resolver threads of resolve_pool.c. */
#include "resolve.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget.h"
#include "clock.h"
#include "configure.h"
#include "libc_compat.h"
#include "log.h"
#include "real.h"
#include "request.h"
#include "thread.h"

struct tb_resolve_real tb_resolve_real;
static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

/* dlsym(RTLD_NEXT) never resolves to our own hooks. */
static void bind_resolve(void)
{
	*(void **)&tb_resolve_real.getaddrinfo = dlsym(RTLD_NEXT, "getaddrinfo");
	*(void **)&tb_resolve_real.gethostbyname = dlsym(RTLD_NEXT, "gethostbyname");
	*(void **)&tb_resolve_real.gethostbyname2 = dlsym(RTLD_NEXT, "gethostbyname2");
	*(void **)&tb_resolve_real.gethostbyname_r = dlsym(RTLD_NEXT, "gethostbyname_r");
	*(void **)&tb_resolve_real.gethostbyname2_r = dlsym(RTLD_NEXT, "gethostbyname2_r");
	*(void **)&tb_resolve_real.getnameinfo = dlsym(RTLD_NEXT, "getnameinfo");
	*(void **)&tb_resolve_real.gethostbyaddr = dlsym(RTLD_NEXT, "gethostbyaddr");
	*(void **)&tb_resolve_real.gethostbyaddr_r = dlsym(RTLD_NEXT, "gethostbyaddr_r");
	tb_atfork(NULL, NULL, tb_resolve_fork_child);
}

void tb_resolve_bind(void)
{
	pthread_once(&bind_once, bind_resolve);
}

/*
 * /etc/hosts. A name it lists (for the family asked) is answered by the files backend
 * before any DNS query when nsswitch.conf puts `files` first, so it is looked up in the
 * caller, natively: no thread hop for localhost. Names are kept sorted, case-folded the way
 * the files backend compares them (strcasecmp), each with the families it has addresses for.
 * The addresses of lines that name a host are kept sorted too, for reverse lookups
 * (getnameinfo of 127.0.0.1): family and bytes as written, since glibc's files backend
 * matches them so (::ffff:127.0.0.1 is not answered by a 127.0.0.1 line: it goes to DNS).
 * An address only glibc's parser accepts (inet_aton's 127.1) is not kept: its lookup takes
 * the resolver thread, with the same answer.
 *
 * A snapshot is immutable once published. The file is stat'ed at most once a second and
 * reloaded only when its identity changed (device, inode, size, mtime, ctime): a file that
 * cannot be read or is over HOSTS_MAX_BYTES gives an empty snapshot that still records what
 * stat saw, so it is not opened again until it changes (regress/hosts_snapshot_leak). A
 * stale snapshot errs both ways for at most a second: a name just added takes the bounded
 * path (slower, same answer), a name just removed goes to DNS unbounded.
 *
 * Readers hold a snapshot without a lock. Each counts itself in hosts_readers before it
 * loads the pointer and leaves after its last look (both sequentially consistent), so a
 * count that only the reloading thread makes, read after a new snapshot was published,
 * proves no reader holds a replaced one: those are freed then, and memory stays at the
 * current snapshot (plus the replaced ones while lookups overlap every check).
 */
#define HOSTS_PATH "/etc/hosts"
#define HOSTS_MAX_BYTES (1 << 20)
#define HOSTS_RECHECK_NS TB_NS_PER_S
#define FAM_V4 1u
#define FAM_V6 2u

struct host_name {
	const char *name;
	unsigned fams;
};

struct host_addr {
	unsigned char fam; /* FAM_V4 or FAM_V6 */
	unsigned char a[16];
};

struct hosts_snap {
	struct hosts_snap *older; /* replaced snapshots not yet freed (hosts_lock) */
	bool exists;              /* stat saw the file: the identity below is its */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	size_t n;
	struct host_name *names;
	size_t n_addrs;
	struct host_addr *addrs;
	char text[];
};

static _Atomic(struct hosts_snap *) hosts;
static atomic_int hosts_readers;
static atomic_llong hosts_checked = -1;
static pthread_mutex_t hosts_lock = PTHREAD_MUTEX_INITIALIZER;
static bool files_first;
static pthread_once_t nss_once = PTHREAD_ONCE_INIT;

/* Reads a small file whole into a malloc'ed, NUL-terminated buffer. NULL when it cannot. */
static char *read_small(int fd, size_t size)
{
	char *text = malloc(size + 1);
	size_t got = 0;

	if (text == NULL)
		return NULL;
	while (got < size) {
		ssize_t n = tb_real.read(fd, text + got, size - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	text[got] = '\0';
	return text;
}

/*
 * nsswitch.conf's hosts line, read once: do the files come first? glibc's default without
 * the file or the line is "dns [!UNAVAIL=return] files", so then they do not.
 */
static void read_nsswitch(void)
{
	int fd = tb_open_raw(AT_FDCWD, "/etc/nsswitch.conf", O_RDONLY | O_CLOEXEC, 0);
	struct stat st;
	char *text, *line, *save = NULL;

	if (fd < 0)
		return;
	text = fstat(fd, &st) == 0 && st.st_size < HOSTS_MAX_BYTES ?
		       read_small(fd, (size_t)st.st_size) : NULL;
	tb_real.close(fd);
	if (text == NULL)
		return;
	for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		const char *p = line + strspn(line, " \t");

		if (strncmp(p, "hosts:", 6) != 0)
			continue;
		p += 6;
		p += strspn(p, " \t");
		files_first = strncmp(p, "files", 5) == 0 && strchr(" \t#", p[5]) != NULL;
		break;
	}
	free(text);
}

static int by_name(const void *a, const void *b)
{
	return strcasecmp(((const struct host_name *)a)->name, ((const struct host_name *)b)->name);
}

static int by_addr(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct host_addr));
}

/* The address a line begins with, when inet_pton reads it; else false. */
static bool parse_addr(const char *tok, struct host_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->fam = strchr(tok, ':') != NULL ? FAM_V6 : FAM_V4;
	return inet_pton(out->fam == FAM_V6 ? AF_INET6 : AF_INET, tok, out->a) == 1;
}

/* Splits text in place: one entry per name, its family from the line's address, and one per
 * line that names a host and whose address parses. Returns the number of names and sets
 * *n_addrs, writing them when `out` and `addrs` are not NULL. */
static size_t parse_hosts(char *text, size_t len, struct host_name *out, struct host_addr *addrs,
			  size_t *n_addrs)
{
	size_t n = 0;
	char *p = text, *end = text + len;

	*n_addrs = 0;
	while (p < end) {
		char *eol = memchr(p, '\n', (size_t)(end - p)), *hash, *tok, *save = NULL;
		struct host_addr addr;
		bool has_addr;
		unsigned fam;

		if (eol == NULL)
			eol = end;
		*eol = '\0';
		if ((hash = strchr(p, '#')) != NULL)
			*hash = '\0';
		tok = strtok_r(p, " \t\r", &save);
		if (tok != NULL) {
			has_addr = parse_addr(tok, &addr);
			fam = addr.fam;
			if ((tok = strtok_r(NULL, " \t\r", &save)) != NULL && has_addr) {
				if (addrs != NULL)
					addrs[*n_addrs] = addr;
				(*n_addrs)++;
			}
			for (; tok != NULL; tok = strtok_r(NULL, " \t\r", &save)) {
				if (out != NULL)
					out[n] = (struct host_name){ tok, fam };
				n++;
			}
		}
		p = eol + 1;
	}
	return n;
}

static void set_identity(struct hosts_snap *s, const struct stat *st)
{
	s->exists = true;
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->size = st->st_size;
	s->mtime = st->st_mtim;
	s->ctime = st->st_ctim;
}

/*
 * A snapshot of the file as it is now. `seen` is what stat found (NULL: no file). A file
 * that cannot be opened or read, or is too large, gives a snapshot with no names and the
 * identity stat saw; one that was read carries the identity of what was read (fstat). NULL
 * only without memory.
 */
static struct hosts_snap *load_hosts(const struct stat *seen)
{
	int fd = seen != NULL ? open(HOSTS_PATH, O_RDONLY | O_CLOEXEC) : -1;
	struct stat st;
	struct hosts_snap *s;
	char *copy;
	size_t len, n, n_addrs, kept = 0;

	if (fd < 0 || fstat(fd, &st) != 0 || st.st_size > HOSTS_MAX_BYTES) {
		if (fd >= 0)
			tb_real.close(fd);
		s = calloc(1, sizeof(*s));
		if (s != NULL && seen != NULL)
			set_identity(s, seen);
		return s;
	}
	s = calloc(1, sizeof(*s) + (size_t)st.st_size + 1);
	copy = s != NULL ? read_small(fd, (size_t)st.st_size) : NULL;
	tb_real.close(fd);
	if (s == NULL)
		return NULL;
	set_identity(s, &st);
	if (copy == NULL)
		return s;
	len = strlen(copy);
	memcpy(s->text, copy, len + 1);
	/* The first pass runs on the copy (it splits what it reads), the second on the text the
	 * names will point into. */
	n = parse_hosts(copy, len, NULL, NULL, &n_addrs);
	free(copy);
	s->names = n > 0 ? malloc(n * sizeof(*s->names)) : NULL;
	s->addrs = n_addrs > 0 ? malloc(n_addrs * sizeof(*s->addrs)) : NULL;
	if ((n > 0 && s->names == NULL) || (n_addrs > 0 && s->addrs == NULL)) {
		free(s->names);
		free(s->addrs);
		s->names = NULL;
		s->addrs = NULL;
		return s;
	}
	parse_hosts(s->text, len, s->names, s->addrs, &n_addrs);
	qsort(s->addrs, n_addrs, sizeof(*s->addrs), by_addr);
	s->n_addrs = n_addrs;
	qsort(s->names, n, sizeof(*s->names), by_name);
	for (size_t i = 0; i < n; i++) {
		if (kept > 0 && strcasecmp(s->names[kept - 1].name, s->names[i].name) == 0)
			s->names[kept - 1].fams |= s->names[i].fams;
		else
			s->names[kept++] = s->names[i];
	}
	s->n = kept;
	return s;
}

static bool same_file(const struct hosts_snap *s, const struct stat *st, bool exists)
{
	if (!exists || !s->exists)
		return exists == s->exists;
	return s->dev == st->st_dev && s->ino == st->st_ino && s->size == st->st_size &&
	       s->mtime.tv_sec == st->st_mtim.tv_sec && s->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       s->ctime.tv_sec == st->st_ctim.tv_sec && s->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static void free_snap(struct hosts_snap *s)
{
	free(s->names);
	free(s->addrs);
	free(s);
}

/*
 * The current snapshot, reloaded first when a second has passed and the file changed. A
 * thread that finds another one reloading uses the snapshot it has. Called by a reader
 * (counted in hosts_readers): when it is the only one, the replaced snapshots go.
 */
static const struct hosts_snap *current_hosts(void)
{
	int64_t now = tb_now(), last = atomic_load_explicit(&hosts_checked, memory_order_relaxed);
	struct hosts_snap *s = atomic_load(&hosts), *old;
	struct stat st;
	bool exists;

	if (s != NULL && last >= 0 && now - last < HOSTS_RECHECK_NS)
		return s;
	if (pthread_mutex_trylock(&hosts_lock) != 0)
		return s;
	s = atomic_load(&hosts);
	atomic_store_explicit(&hosts_checked, now, memory_order_relaxed);
	exists = stat(HOSTS_PATH, &st) == 0;
	if (s == NULL || !same_file(s, &st, exists)) {
		struct hosts_snap *fresh = load_hosts(exists ? &st : NULL);

		if (fresh != NULL) {
			fresh->older = s;
			atomic_store(&hosts, fresh);
			s = fresh;
		}
	}
	if (s != NULL && s->older != NULL && atomic_load(&hosts_readers) == 1) {
		for (old = s->older; old != NULL;) {
			struct hosts_snap *next = old->older;

			free_snap(old);
			old = next;
		}
		s->older = NULL;
	}
	pthread_mutex_unlock(&hosts_lock);
	return s;
}

/* True when the files backend answers without asking DNS: `name` for `af`, or when name is
 * NULL the reverse lookup of `addr`. */
static bool hosts_answer(const char *name, int af, const struct host_addr *addr)
{
	const struct hosts_snap *s;
	const struct host_name key = { name, 0 }, *hit;
	unsigned want = af == AF_INET ? FAM_V4 : af == AF_INET6 ? FAM_V6 : FAM_V4 | FAM_V6;

	bool found = false;

	pthread_once(&nss_once, read_nsswitch);
	if (!files_first)
		return false;
	atomic_fetch_add(&hosts_readers, 1);
	s = current_hosts();
	if (s != NULL && name != NULL && s->n > 0) {
		hit = bsearch(&key, s->names, s->n, sizeof(*s->names), by_name);
		found = hit != NULL && (hit->fams & want) != 0;
	} else if (s != NULL && name == NULL && s->n_addrs > 0) {
		found = bsearch(addr, s->addrs, s->n_addrs, sizeof(*s->addrs), by_addr) != NULL;
	}
	atomic_fetch_sub(&hosts_readers, 1);
	return found;
}

/* A numeric address never reaches a resolver (getaddrinfo accepts inet_aton's forms, and a
 * name with a colon can only be an IPv6 literal, scope id included). */
static bool is_numeric(const char *name)
{
	struct in_addr a;

	return strchr(name, ':') != NULL || inet_aton(name, &a) != 0;
}

/* The destination a lookup stands for in the budget: the resolver, whichever it is. It only
 * matters to the retry window: after a lookup cut at the deadline, further lookups of the
 * thread fail at once until the window has passed; its connects are not affected. */
static const struct tb_dest lookup_dest;

/* Whether phase dns bounds this thread's lookups at all (see tb_lookup_plan in resolve.h). */
static bool bounding(void)
{
	if (!atomic_load_explicit(&tb_governing, memory_order_relaxed) || tb_resolver_thread)
		return false;
	if (tb_default_settings.dns_ns <= 0 && tb_default_settings.deadline_ns <= 0 &&
	    tb_req_deadline() == TB_NEVER)
		return false;
	/* A vfork child runs on its parent's budgets and memory and must change neither: its
	 * lookup runs natively, as it would without timebox (no resolver thread of its own, no
	 * request on the parent's queue, no snapshot of /etc/hosts made or freed). */
	return !tb_foreign_process();
}

/* A lookup of `name` that needs a resolver: its step in the thread's budget, and its limit. */
static enum tb_lookup_plan plan_step(struct tb_lookup *lk, const char *name)
{
	int64_t dns = tb_default_settings.dns_ns, now, limit, start, deadline;
	int step = TB_STEP_GO;

	now = tb_now();
	start = now;
	deadline = TB_NEVER;
	step = tb_budget_step(tb_budget_here(), &tb_default_settings, &lookup_dest, now, &start,
			      &deadline);
	if (step == TB_STEP_GO && __builtin_expect(tb_req_deadline() != TB_NEVER, 0)) {
		/* The thread's request deadline bounds the lookup too (request.h); past it the
		 * lookup is refused, as a connect would be. */
		struct tb_req_tag tag;
		int64_t rstart, r = tb_req_bound(&tb_default_settings, &tag, &rstart);

		if (r != TB_NEVER && r < deadline) {
			deadline = r;
			if (now >= r) {
				start = rstart;
				step = TB_STEP_EXPIRED;
			}
		}
	}
	lk->name = name;
	lk->call_start = start;
	lk->deadline = deadline;
	if (step != TB_STEP_GO) {
		/* What the log says of an attempt after the deadline: the call's time, its limit. */
		lk->start = start;
		lk->expiry = deadline;
		return TB_LOOKUP_EXPIRED;
	}
	limit = dns > 0 ? dns : TB_NEVER;
	if (deadline != TB_NEVER && deadline - now < limit)
		limit = deadline - now;
	if (limit >= TB_NEVER - now)
		return TB_LOOKUP_NATIVE; /* "2562047h": no limit in practice */
	lk->start = now;
	lk->expiry = now + limit;
	return TB_LOOKUP_BOUNDED;
}

enum tb_lookup_plan tb_lookup_plan(struct tb_lookup *lk, const char *name, int af, bool numeric)
{
	if (!bounding())
		return TB_LOOKUP_NATIVE;
	if (name == NULL || *name == '\0' || numeric || is_numeric(name) ||
	    hosts_answer(name, af, NULL))
		return TB_LOOKUP_NATIVE;
	return plan_step(lk, name);
}

/* A reverse lookup of key's address (family af): native when /etc/hosts lists it, else
 * planned as a name's, its name for the log the address in text (lk->text). */
static enum tb_lookup_plan plan_reverse(struct tb_lookup *lk, int af, const struct host_addr *key)
{
	if (hosts_answer(NULL, af, key))
		return TB_LOOKUP_NATIVE;
	if (inet_ntop(af, key->a, lk->text, sizeof(lk->text)) == NULL)
		lk->text[0] = '\0';
	return plan_step(lk, lk->text);
}

enum tb_lookup_plan tb_lookup_plan_addr(struct tb_lookup *lk, const struct sockaddr *sa,
					socklen_t salen, bool numeric)
{
	struct host_addr key;
	int af;

	if (numeric || sa == NULL || salen < (socklen_t)sizeof(sa_family_t) || !bounding())
		return TB_LOOKUP_NATIVE;
	memset(&key, 0, sizeof(key));
	af = sa->sa_family;
	if (af == AF_INET && salen >= (socklen_t)sizeof(struct sockaddr_in)) {
		key.fam = FAM_V4;
		memcpy(key.a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (af == AF_INET6 && salen >= (socklen_t)sizeof(struct sockaddr_in6)) {
		key.fam = FAM_V6;
		memcpy(key.a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	} else {
		return TB_LOOKUP_NATIVE; /* AF_UNIX, another family, or libc's own EAI_FAMILY */
	}
	return plan_reverse(lk, af, &key);
}

enum tb_lookup_plan tb_lookup_plan_hostaddr(struct tb_lookup *lk, const void *addr,
					    socklen_t len, int af)
{
	static const unsigned char any6[16];
	struct host_addr key;

	if (addr == NULL || !bounding())
		return TB_LOOKUP_NATIVE;
	memset(&key, 0, sizeof(key));
	/* Only an address of its family's own size: libc refuses a shorter one (EAFNOSUPPORT in
	 * glibc, EINVAL in musl) and another family without asking anyone. glibc accepts a
	 * longer one and asks DNS for its first bytes: that rare call stays native too. */
	if (af == AF_INET && len == 4)
		key.fam = FAM_V4;
	else if (af == AF_INET6 && len == 16)
		key.fam = FAM_V6;
	else
		return TB_LOOKUP_NATIVE;
	memcpy(key.a, addr, len);
#ifdef __GLIBC__
	/* glibc answers :: itself (HOST_NOT_FOUND, ENOENT) before any source; musl asks DNS. */
	if (len == 16 && memcmp(key.a, any6, 16) == 0)
		return TB_LOOKUP_NATIVE;
#else
	(void)any6;
#endif
	return plan_reverse(lk, af, &key);
}

int tb_addrinfo_unanswered(void)
{
#ifdef __GLIBC__
	h_errno = TRY_AGAIN;
	errno = EAGAIN;
#endif
	return EAI_AGAIN;
}

int tb_nameinfo_unanswered(const struct sockaddr *sa, socklen_t salen, char *host,
			   socklen_t hostlen, char *serv, socklen_t servlen, int flags)
{
#ifdef __GLIBC__
	/* glibc's getnameinfo when its gethostbyaddr_r says TRY_AGAIN (measured on a resolver
	 * that never answers: EAI_AGAIN, h_errno 2, nothing written). */
	(void)sa, (void)salen, (void)host, (void)hostlen, (void)serv, (void)servlen, (void)flags;
	h_errno = TRY_AGAIN;
	return EAI_AGAIN;
#else
	/* musl's getnameinfo has no temporary failure: without an answer it writes the numeric
	 * address, or fails with EAI_NONAME under NI_NAMEREQD - what it does with
	 * NI_NUMERICHOST, which asks no resolver. */
	return tb_resolve_real.getnameinfo(sa, salen, host, hostlen, serv, servlen,
					   flags | NI_NUMERICHOST);
#endif
}

void tb_lookup_expired(const struct tb_lookup *lk)
{
	tb_log_dns_timeout(lk->name, tb_now() - lk->start, lk->expiry - lk->start);
}

/*
 * A lookup answered ends the call that lookups opened as far as the next lookup goes (a
 * program that resolves name after name must not have them share one deadline), while the
 * connect that follows still takes that call over. Only a lookup retried after a failure
 * joins the earlier one's call.
 */
void tb_lookup_answered(void)
{
	tb_budget_on_answer(tb_budget_here(), &tb_default_settings);
}

/*
 * A lookup cut at its expiry. Cut by the deadline it ends the call, as a socket's expiry at
 * the deadline would. Cut by dns_timeout it leaves the call open, so a retry within the
 * deadline spends the same budget; it is not marked as a failed attempt, because a failed
 * call makes any later step of the thread an expiry, however much later it comes, and a
 * thread that only resolves names (curl's resolver threads) must not fail its next lookup
 * an hour later for that.
 */
void tb_lookup_cut(const struct tb_lookup *lk)
{
	tb_lookup_expired(lk);
	if (lk->deadline != TB_NEVER && lk->expiry >= lk->deadline)
		tb_budget_on_expired(tb_budget_here(), &tb_default_settings, &lookup_dest,
				     TB_PHASE_DEADLINE, lk->deadline);
}

/* A child of fork() may find a lock held by a thread it does not have. */
void tb_resolve_fork_child(void)
{
	pthread_mutex_init(&hosts_lock, NULL);
	/* The forking thread is not inside a look (it is in fork), and the others are gone. */
	atomic_store(&hosts_readers, 0);
	tb_resolve_pool_fork_child();
}
