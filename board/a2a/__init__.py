"""The A2A surface (Agent2Agent protocol, A2A 1.0 through the a2a-sdk's routes): tasks are todos.

board/a2a/server.py mounts the SDK's JSON-RPC routes at /a2a (with its 0.3 compatibility)
and its agent card at /.well-known/agent-card.json, behind the same bearer authentication,
rate limit and body limit as /mcp. board/a2a/handler.py is the SDK RequestHandler that maps
each operation onto the Store; board/a2a/tasks.py turns todos into A2A tasks and messages
into todos.

Push notifications plug in through one seam. The handler is given `push: PushNotifications |
None` (A2ASurface(settings, mcp, push=...) in board/app.py). With None, the four push config
operations answer the SDK's PushNotificationNotSupportedError and the card says
push_notifications false. With an object, the card says true and the handler calls, with
the authenticated caller (board.store.store.Agent) and the SDK's parsed request:

    class PushNotifications(Protocol):
        def check(self, config: TaskPushNotificationConfig, field: str) -> None  # raises Invalid naming field.<its field>
        async def create(self, agent: Agent, config: TaskPushNotificationConfig) -> TaskPushNotificationConfig
        async def get(self, agent: Agent, request: GetTaskPushNotificationConfigRequest) -> TaskPushNotificationConfig
        async def list(self, agent: Agent, request: ListTaskPushNotificationConfigsRequest
                       ) -> ListTaskPushNotificationConfigsResponse
        async def delete(self, agent: Agent, request: DeleteTaskPushNotificationConfigRequest) -> None

(the types are a2a.types.a2a_pb2's). A method raises board.errors' errors (NotFound for a
foreign or never-minted task, Invalid naming the field, ...): the handler turns them into
A2A errors as it does the Store's. A SendMessage whose configuration carries a
task_push_notification_config calls check() before it adds the task, and create() for the
task just added, its task_id set.
The Protocol is board.a2a.handler.PushNotifications.
"""
