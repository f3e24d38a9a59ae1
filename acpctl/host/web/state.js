// What the page holds: the host's last answers, each agent's connection with the sessions
// it has joined to answer their questions, and the session being viewed.
export const page = {
  main: null, // the connection to the host's default agent: the lists, the devices
  agents: new Map(), // agent name -> { connection, joined: Set of session ids }
  asked: new Map(), // session id -> { connection, request, at }: what this device was asked, when
  role: new Map(), // session id -> this device's role there
  latest: { waiting: [], sessions: [] },
  render: () => {}, // draws what changed (app.js)
  refresh: async () => {}, // asks the host for the lists again (app.js)
};

export const view = {
  entry: null, // the session viewed: { agent, sessionId, cwd, title }
  connection: null,
  last: null,
  tools: new Map(),
  firstPrompt: null, // its title until the agent names it
  leaving: false,
  replays: 0, // the transcript made from the history
  resumes: 0, // the connection resumed by its cursor after a drop
};
