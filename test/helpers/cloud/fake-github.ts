/**
 * A small fake of GitHub's commit status API on loopback: `POST /repos/{owner}/{repo}/statuses/{sha}`
 * with a bearer token, as GitHub answers it (201 and the status; 401 for a wrong token; 422 for a
 * bad state). Enough for a Provider of type `github` (its `apiUrl` pointed here).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CommitStatus {
  owner: string;
  repo: string;
  sha: string;
  state: string;
  context: string;
  description?: string;
}

export interface FakeGithub {
  url: string;
  statuses: CommitStatus[];
  /** Requests refused for their token. */
  unauthorized: number;
  stop(): Promise<void>;
}

const STATES = new Set(['error', 'failure', 'pending', 'success']);

export async function startFakeGithub(token: string): Promise<FakeGithub> {
  const statuses: CommitStatus[] = [];
  const fake: FakeGithub = { url: '', statuses, unauthorized: 0, stop: async () => {} };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const answer = (code: number, body: object) => {
        res.writeHead(code, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      const m = /^\/repos\/([^/]+)\/([^/]+)\/statuses\/([0-9a-f]{7,64})$/.exec(req.url ?? '');
      if (req.method !== 'POST' || !m) return answer(404, { message: 'Not Found' });
      if (req.headers.authorization !== `Bearer ${token}`) {
        fake.unauthorized++;
        return answer(401, { message: 'Bad credentials' });
      }
      let body: { state?: string; context?: string; description?: string };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
      } catch {
        return answer(400, { message: 'Problems parsing JSON' });
      }
      if (!body.state || !STATES.has(body.state)) return answer(422, { message: 'Validation Failed' });
      const s: CommitStatus = {
        owner: m[1]!,
        repo: m[2]!,
        sha: m[3]!,
        state: body.state,
        context: body.context ?? 'default',
        ...(body.description !== undefined ? { description: body.description } : {}),
      };
      statuses.push(s);
      answer(201, { ...s, id: statuses.length });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.stop = async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  };
  return fake;
}
